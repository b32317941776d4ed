"""Server configuration: one pydantic model for everything `patchgym serve` can be told."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field

from patchgym.env.limits import EpisodeLimits


class ServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limits: EpisodeLimits = Field(default_factory=EpisodeLimits, description="defaults for every episode")
    ceilings: EpisodeLimits = Field(
        default_factory=lambda: EpisodeLimits(
            max_turns=500,
            max_tool_calls_per_turn=64,
            wall_time_s=6 * 3600,
            command_timeout_s=1800,
            max_output_chars=200_000,
            max_format_errors=100,
        ),
        description="the most a client may ask for per episode",
    )
    default_parser: str = "auto"
    backend: str = "local"
    token: str | None = Field(None, description="bearer token required on every route but /health")
    max_episodes: int = Field(64, ge=1, description="live episodes at once; beyond it POST /episodes answers 503")
    retry_after_s: int = Field(5, ge=1, description="the Retry-After of a 503")
    idle_ttl_s: float = Field(900.0, gt=0, description="an episode with no request for this long is closed")
    reap_interval_s: float = Field(5.0, gt=0)
    keep_finished: int = Field(1000, ge=0, description="finished episodes kept in memory for GET")
    finished_ttl_s: float = Field(900.0, gt=0, description="how long a finished episode stays readable")
    max_concurrent_grades: int = Field(default_factory=lambda: max(os.cpu_count() or 1, 1), ge=1)
    max_body_bytes: int = Field(16 * 1024 * 1024, ge=1024)
    max_patch_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    worker_threads: int = Field(256, ge=4, description="threads for blocking sandbox work")
    episode_log: str | None = Field(None, description="JSONL file every finished episode is appended to")
    grade_log_dir: str | None = Field(None, description="where grading keeps its logs")
    telemetry: bool = Field(
        False,
        description="FastAPI's native OpenTelemetry (spans, metrics, logs through the global providers); "
        "off by default: its per-request checks cost every step even with no provider configured",
    )

"""Episode limits: how long an episode may run and how much it may ask for.

A server has default limits and ceilings; an episode may override any default when it starts, but
never above the server's ceiling (a client cannot buy itself an hour-long command on a shared
server). Everything here is plain pydantic, shared by the server, the episode and the client.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class EpisodeLimits(BaseModel):
    """Limits for one episode. Every end caused by a limit has its own status (see episode.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_turns: int = Field(50, ge=1, le=10_000, description="steps before the episode ends with turn_limit")
    max_tool_calls_per_turn: int = Field(16, ge=1, le=1_000, description="tool calls one step may make")
    wall_time_s: float = Field(3600.0, gt=0, le=7 * 86400, description="seconds from start to time_limit")
    command_timeout_s: float = Field(120.0, gt=0, le=86400, description="seconds one bash command may run")
    max_output_chars: int = Field(
        16_000, ge=200, le=10_000_000, description="characters of one tool result (head and tail kept)"
    )
    max_format_errors: int = Field(
        3, ge=1, le=10_000, description="consecutive malformed steps before the episode ends with format_error"
    )

    def with_overrides(self, overrides: "LimitOverrides | None", ceiling: "EpisodeLimits") -> "EpisodeLimits":
        """These limits with `overrides` applied; ValueError names any value above `ceiling`."""
        if overrides is None:
            return self
        changes = overrides.model_dump(exclude_none=True)
        too_high = [
            f"{name}={value} is above this server's ceiling {getattr(ceiling, name)}"
            for name, value in changes.items()
            if value > getattr(ceiling, name)
        ]
        if too_high:
            raise ValueError("; ".join(too_high))
        return self.model_copy(update=changes)


class LimitOverrides(BaseModel):
    """Per-episode overrides: any field left out keeps the server's default."""

    model_config = ConfigDict(extra="forbid")

    max_turns: int | None = Field(None, ge=1, le=10_000)
    max_tool_calls_per_turn: int | None = Field(None, ge=1, le=1_000)
    wall_time_s: float | None = Field(None, gt=0, le=7 * 86400)
    command_timeout_s: float | None = Field(None, gt=0, le=86400)
    max_output_chars: int | None = Field(None, ge=200, le=10_000_000)
    max_format_errors: int | None = Field(None, ge=1, le=10_000)


def limits_from(values: dict[str, Any] | None) -> EpisodeLimits:
    """EpisodeLimits from a plain dict (CLI and config files); unknown keys are an error."""
    return EpisodeLimits(**(values or {}))

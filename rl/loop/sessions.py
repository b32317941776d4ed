"""What the loop hands the rollouts: sampling parameters, session limits, task ids, the env client.

Owns `sampling_params(cfg)` (the run's `SamplingParams`: replay asks for the support, score
centering without replay for the top-20 log-probs), `session_limits(cfg)` (the rollouts'
`SessionLimits`, with the episode limits passed to the environment), `resolve_task_ids` ("@FILE"
entries expanded), `default_session_fn` (`patchgym.rl.rollout.run_session`) and
`EnvClientContext` (`async with` an `AsyncEnvClient` on the run's environment URL: the loop reaches
the environment through that client and nothing else). Used by the loop, the warm-up and the
evaluation, so they run sessions alike.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from patchgym.rl.trajectory import Trajectory

from .config import RunConfig

SessionFn = Callable[..., Awaitable[Trajectory]]


def sampling_params(cfg: RunConfig, *, temperature: float | None = None):
    from patchgym.rl.sampler.types import SamplingParams

    sc_without_replay = cfg.loss.kind.startswith("sc") and not cfg.loss.replay
    return SamplingParams(
        temperature=temperature or cfg.sampling.temperature, top_p=cfg.sampling.top_p, top_k=cfg.sampling.top_k,
        max_new_tokens=cfg.limits.max_tokens_per_turn, return_support=cfg.loss.replay,
        top_logprobs=20 if sc_without_replay else 0,
    )


def session_limits(cfg: RunConfig) -> Any:
    """The rollouts' SessionLimits for the run (None when the rollouts are not importable)."""
    try:
        from patchgym.rl.rollout.session import SessionLimits
    except ImportError:
        return None
    lim = cfg.limits
    env = {"max_turns": lim.max_turns}
    if lim.max_format_errors is not None:
        env["max_format_errors"] = lim.max_format_errors
    return SessionLimits(max_turns=lim.max_turns, max_context_tokens=lim.max_context, max_tokens_per_turn=lim.max_tokens_per_turn,
                         env=env)


def default_session_fn() -> SessionFn:
    from patchgym.rl.rollout.session import run_session

    return run_session


def resolve_task_ids(entries: Sequence[str]) -> list[str]:
    """Task ids, where an entry "@FILE" stands for every `instance_id` of a JSONL task file."""
    out: list[str] = []
    for entry in entries:
        if entry.startswith("@"):
            path = Path(entry[1:])
            if not path.is_file():
                raise ValueError(f"tasks: {entry!r} names no task file")
            for line in path.read_text().splitlines():
                if line.strip():
                    out.append(json.loads(line)["instance_id"])
        else:
            out.append(entry)
    return out


class EnvClientContext:
    """`async with` an AsyncEnvClient on the run's environment URL."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url, self.token = url, token

    async def __aenter__(self) -> Any:
        from patchgym.env.client import AsyncEnvClient

        self.client = AsyncEnvClient(self.url, token=self.token, busy_retries=20)
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()

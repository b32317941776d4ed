"""Evaluation: pass@k on a held-out task set, always sampled by a BF16 sampler group.

Owns `evaluate_tasks` (n sessions per task through the real environment, at most `concurrency`
at once, outcomes = reward > 0, then `passk.mean_pass_at_k`), `Evaluator` (what the loop calls every
`eval.every` updates: it loads the trainer's current weights into its own BF16 `EmbeddedSampler`,
whatever the training fleet's formats, and returns one `eval.jsonl` row) and `success_rate` (the
same sessions, reported as a plain fraction; the warm-up measures with it). The estimator itself
is `passk.py`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Mapping, Sequence

from .config import RunConfig
from .passk import mean_pass_at_k


async def run_task_sessions(
    env: Any, router: Any, tokenizer: Any, task_ids: Sequence[str], n: int, params: Any, limits: Any,
    *, concurrency: int = 4, session_fn: Callable[..., Any] | None = None, tag: str = "eval",
    on_done: Callable[[Any], None] | None = None,
) -> dict[str, list[Any]]:
    """n sessions per task; {task: [trajectory, ...]} in sample order. `on_done(trajectory)` is
    called as each session ends (progress lines for long measurements)."""
    if session_fn is None:
        from patchgym.rl.rollout.session import run_session as session_fn  # type: ignore[no-redef]
    gate = asyncio.Semaphore(max(1, concurrency))
    stamp = f"{tag}-{time.monotonic_ns() % 10**9}"

    async def one(task_id: str, i: int) -> tuple[str, int, Any]:
        async with gate:
            sid = f"{stamp}-{task_id}-{i}"
            try:
                traj = await session_fn(env, router, tokenizer, task_id, params, session_id=sid, limits=limits, sample_index=i)
            finally:
                end = getattr(router, "end_session", None)
                if end:
                    end(sid)
            if on_done is not None:
                on_done(traj)
            return task_id, i, traj

    done = await asyncio.gather(*(one(t, i) for t in task_ids for i in range(n)))
    out: dict[str, list[Any]] = {t: [None] * n for t in task_ids}
    for task_id, i, traj in done:
        out[task_id][i] = traj
    return out


def summarize(results: Mapping[str, Sequence[Any]], ks: Sequence[int]) -> dict[str, Any]:
    outcomes = {t: [float(tr.reward) > 0 for tr in trajs] for t, trajs in results.items()}
    row: dict[str, Any] = {f"pass@{k}": v for k, v in mean_pass_at_k(outcomes, ks).items()}
    allt = [tr for trajs in results.values() for tr in trajs]
    row["n"] = len(next(iter(results.values()))) if results else 0
    row["tasks"] = len(results)
    row["success_rate"] = sum(float(t.reward) > 0 for t in allt) / len(allt) if allt else None
    row["format_error_frac"] = sum(t.status == "format_error" for t in allt) / len(allt) if allt else None
    row["per_task"] = {t: sum(o) for t, o in outcomes.items()}
    statuses: dict[str, int] = {}
    for t in allt:
        statuses[t.status] = statuses.get(t.status, 0) + 1
    row["statuses"] = statuses
    return row


async def evaluate_tasks(
    env: Any, router: Any, tokenizer: Any, task_ids: Sequence[str], *, n: int, ks: Sequence[int], params: Any, limits: Any,
    concurrency: int = 4, session_fn: Callable[..., Any] | None = None,
) -> dict[str, Any]:
    bad = [k for k in ks if k < 1 or k > n]
    if bad:
        raise ValueError(f"every k must be in 1..n={n} (k <= n samples per task); got {list(ks)}")
    if not task_ids:
        raise ValueError("no evaluation tasks given")
    t0 = time.monotonic()
    results = await run_task_sessions(env, router, tokenizer, task_ids, n, params, limits, concurrency=concurrency,
                                      session_fn=session_fn)
    row = summarize(results, ks)
    row["time_s"] = time.monotonic() - t0
    return row


class Evaluator:
    """The loop's periodic evaluation with a BF16 sampler of its own, built on first use."""

    def __init__(self, cfg: RunConfig, tokenizer: Any, sampler_factory: Callable[[], tuple[Any, list[Any]]], env_url: str,
                 *, session_fn: Callable[..., Any] | None = None) -> None:
        from .sessions import resolve_task_ids, sampling_params, session_limits

        self.cfg = cfg
        self.tokenizer = tokenizer
        self.factory = sampler_factory
        self.env_url = env_url
        self.session_fn = session_fn
        self.task_ids = resolve_task_ids(cfg.tasks.eval)
        temperature = cfg.eval.temperature or cfg.sampling.temperature
        self.params = sampling_params(cfg, temperature=temperature)
        self.limits = session_limits(cfg)
        self._router = None
        self._samplers: list[Any] = []

    async def __call__(self, weights: Mapping[str, Any], version: int, *, update: int) -> dict[str, Any]:
        from patchgym.env.client import AsyncEnvClient

        if self._router is None:
            self._router, self._samplers = self.factory()
        t0 = time.monotonic()
        await asyncio.gather(*(s.update_weights(weights, version) for s in self._samplers))
        async with AsyncEnvClient(self.env_url, token=self.cfg.environment.token, busy_retries=20) as env:
            row = await evaluate_tasks(env, self._router, self.tokenizer, self.task_ids, n=self.cfg.eval.n, ks=self.cfg.eval.k,
                                       params=self.params, limits=self.limits, concurrency=self.cfg.eval.sessions,
                                       session_fn=self.session_fn)
        row.update(update=update, version=version, sampler="bf16", time_s=time.monotonic() - t0)
        return row

    def close(self) -> None:
        for s in self._samplers:
            close = getattr(s, "close", None)
            if close:
                close()

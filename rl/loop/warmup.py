"""The cold start: a supervised warm-up on expert trajectories the environment itself produces.

Why: SmolLM2-135M-Instruct alone ends every episode in format errors (issue 11: 32 of 32), so every
GRPO group has advantage 0 and nothing is learned. `run_warmup` replays the warm-up tasks' gold
patches as tool calls through the real environment (`patchgym.rl.rollout.expert`: the ids, chat
template and tool results are exactly the loop's), trains `steps` supervised steps with the run's
own trainer (`sft_step`, its own AdamW at `warmup.lr`), and caches the result by (model, data,
steps, lr, batch, seed) under `$PATCHGYM_HOME/warmup/<key>/` (`model.safetensors` and
`report.json`, written to a temporary directory and renamed). A cached warm-up is loaded without
touching the environment. With `warmup.measure`, it records the success rate (reward > 0) before
and after on the training tasks and on the held-out tasks, sampled by a BF16 sampler at the run's
temperature; the report goes to the cache and to `RUN_DIR/warmup.json`.

After a warm-up the trainer's version is set to 1 (both when trained and when loaded from the
cache), so samplers built afterwards start at version 1. Not covered: the RL loop itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from patchgym.rl.models import patchgym_home, resolve

from .config import RunConfig

WARMUP_VERSION = 1


def warmup_tasks(cfg: RunConfig) -> list[str]:
    from .loop import resolve_task_ids

    return resolve_task_ids(cfg.tasks.train if cfg.warmup.tasks == "train" else list(cfg.warmup.tasks))


def warmup_key(cfg: RunConfig, rows: list[dict[str, Any]]) -> str:
    """Model, data (the tasks' gold patches), steps, lr, batch and seed: what the result depends on."""
    model_dir = resolve(cfg.model.spec)
    data = sorted((r["instance_id"], hashlib.sha256(r.get("patch", "").encode()).hexdigest()) for r in rows)
    w = cfg.warmup
    blob = json.dumps({"model": model_dir.name, "data": data, "steps": w.steps, "lr": w.lr, "batch": w.batch,
                       "seed": cfg.seed, "format": 1})
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _task_rows(task_ids: list[str], tasks: str) -> list[dict[str, Any]]:
    from patchgym.rl.rollout.expert import export_task_rows

    cache = patchgym_home() / "warmup" / "rows"
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"{hashlib.sha256(tasks.encode()).hexdigest()[:12]}.jsonl"
    if path.exists():
        from patchgym.rl.rollout.expert import load_task_rows

        rows = load_task_rows(path)
    else:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        rows = export_task_rows(tasks, tmp)
        os.replace(tmp, path)
    by_id = {r["instance_id"]: r for r in rows}
    missing = [t for t in task_ids if t not in by_id]
    if missing:
        raise ValueError(f"warm-up tasks not in task set {tasks!r}: {', '.join(missing)}")
    return [by_id[t] for t in task_ids]


async def measure_success(
    cfg: RunConfig, env_url: str, tokenizer: Any, router: Any, task_ids: list[str], samples: int,
) -> dict[str, Any]:
    from patchgym.env.client import AsyncEnvClient

    from .evaluate import run_task_sessions
    from .loop import sampling_params, session_limits

    params = sampling_params(cfg)
    async with AsyncEnvClient(env_url, token=cfg.environment.token, busy_retries=20) as env:
        results = await run_task_sessions(env, router, tokenizer, task_ids, samples, params, session_limits(cfg),
                                          concurrency=cfg.eval.sessions, tag="warmup")
    trajs = [t for ts in results.values() for t in ts]
    return {
        "tasks": task_ids, "samples_per_task": samples, "episodes": len(trajs),
        "success_rate": sum(t.reward > 0 for t in trajs) / len(trajs),
        "format_error_frac": sum(t.status == "format_error" for t in trajs) / len(trajs),
        "per_task": {t: sum(x.reward > 0 for x in ts) for t, ts in results.items()},
        "statuses": {s: sum(t.status == s for t in trajs) for s in sorted({t.status for t in trajs})},
    }


def run_warmup(
    cfg: RunConfig, trainer: Any, tokenizer: Any, env_url: str, *, run_dir: Path | None = None,
    eval_sampler_factory: Callable[[], tuple[Any, list[Any]]] | None = None, log: Callable[[str], None] = print,
    force: bool = False,
) -> dict[str, Any]:
    """Warm the trainer's model up (or load the cached result); returns the report."""
    from safetensors.torch import load_file, save_file

    w = cfg.warmup
    task_ids = warmup_tasks(cfg)
    rows = _task_rows(task_ids, cfg.environment.tasks)
    key = warmup_key(cfg, rows)
    home = patchgym_home() / "warmup"
    cached = home / key
    if (cached / "model.safetensors").exists() and not force:
        state = load_file(str(cached / "model.safetensors"))
        missing, unexpected = trainer.model.load_state_dict(state, strict=False)
        if unexpected or any(not m.endswith("lm_head.weight") for m in missing):
            raise ValueError(f"{cached}: cached warm-up does not fit this model (missing {missing[:3]}, unexpected {unexpected[:3]})")
        trainer.version = WARMUP_VERSION
        report = json.loads((cached / "report.json").read_text())
        report["cached"] = True
        log(f"warm-up: loaded from cache {cached}")
        _write_report(run_dir, report)
        return report

    eval_ids = []
    if w.measure:
        from .loop import resolve_task_ids

        eval_ids = resolve_task_ids(cfg.tasks.eval)
    report: dict[str, Any] = {"key": key, "tasks": task_ids, "steps": w.steps, "lr": w.lr, "batch": w.batch,
                              "temperature": cfg.sampling.temperature, "cached": False}
    router = samplers = None
    if w.measure and eval_sampler_factory is not None:
        router, samplers = eval_sampler_factory()
        t0 = time.monotonic()
        log("warm-up: measuring the success rate before (BF16 sampler)")
        report["before"] = {"train": asyncio.run(measure_success(cfg, env_url, tokenizer, router, task_ids, w.measure_samples))}
        if eval_ids:
            report["before"]["eval"] = asyncio.run(measure_success(cfg, env_url, tokenizer, router, eval_ids, w.measure_samples))
        report["before"]["time_s"] = time.monotonic() - t0

    log(f"warm-up: replaying the gold patches of {len(rows)} task(s) through the environment")
    t0 = time.monotonic()
    experts = asyncio.run(_experts(env_url, tokenizer, rows, cfg.environment.token))
    report["expert_trajectories"] = len(experts)
    report["expert_tokens"] = sum(t.num_sampled for t in experts)
    report["expert_time_s"] = time.monotonic() - t0
    if not experts:
        raise RuntimeError("warm-up: no gold replay resolved its task, so there is nothing to train on")
    rng = random.Random(cfg.seed)
    t0 = time.monotonic()
    nll = []
    for step in range(w.steps):
        batch = rng.sample(experts, min(w.batch, len(experts)))
        m = trainer.sft_step(batch)
        nll.append(float(m.get("nll", m.get("loss", float("nan")))))
        if step == 0 or (step + 1) % 5 == 0 or step + 1 == w.steps:
            log(f"warm-up: step {step + 1}/{w.steps} nll {nll[-1]:.4f}")
    report["nll"] = nll
    report["sft_time_s"] = time.monotonic() - t0
    trainer.version = WARMUP_VERSION

    home.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=home))
    try:
        state = {k: v.detach().contiguous().clone() for k, v in trainer.model.state_dict().items()}
        # tied embeddings: one tensor under two names; safetensors stores one
        if "lm_head.weight" in state and "model.embed_tokens.weight" in state and \
                trainer.model.state_dict()["lm_head.weight"].data_ptr() == trainer.model.state_dict()["model.embed_tokens.weight"].data_ptr():
            del state["lm_head.weight"]
        save_file(state, str(tmp / "model.safetensors"))
        (tmp / "report.json").write_text(json.dumps(report, indent=2))
        shutil.rmtree(cached, ignore_errors=True)
        os.replace(tmp, cached)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if router is not None:
        t0 = time.monotonic()
        log("warm-up: measuring the success rate after")

        async def refresh() -> None:
            await asyncio.gather(*(s.update_weights(trainer.weights(), WARMUP_VERSION) for s in samplers))

        asyncio.run(refresh())
        report["after"] = {"train": asyncio.run(measure_success(cfg, env_url, tokenizer, router, task_ids, w.measure_samples))}
        if eval_ids:
            report["after"]["eval"] = asyncio.run(measure_success(cfg, env_url, tokenizer, router, eval_ids, w.measure_samples))
        report["after"]["time_s"] = time.monotonic() - t0
        for s in samplers:
            close = getattr(s, "close", None)
            if close:
                close()

        (cached / "report.json").write_text(json.dumps(report, indent=2))  # with the after numbers
    _write_report(run_dir, report)
    return report


async def _experts(env_url: str, tokenizer: Any, rows: list[dict[str, Any]], token: str | None) -> list[Any]:
    from patchgym.env.client import AsyncEnvClient
    from patchgym.rl.rollout.expert import build_expert_report

    async with AsyncEnvClient(env_url, token=token, busy_retries=20) as env:
        report = await build_expert_report(env, tokenizer, rows)
    if report.failed:
        print(report.summary())
    return report.trajectories


def _write_report(run_dir: Path | None, report: dict[str, Any]) -> None:
    if run_dir is not None:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        (Path(run_dir) / "warmup.json").write_text(json.dumps(report, indent=2))

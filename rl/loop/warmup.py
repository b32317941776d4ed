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
temperature, one progress line per episode; the report goes to the cache and to
`RUN_DIR/warmup.json`. The rates are cached on the conditions they were measured under
(`measure_key`: the base model, the tasks, the sampling, the limits, the samples, the seed): the
rate before in `warmup/before-<key>.json` (a new warm-up setting does not measure it again), the
rate after in `warmup/<warm-up key>/after-<key>.json` (new limits measure again without training).

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
from .metrics import write_lines_atomic

WARMUP_VERSION = 1


def warmup_tasks(cfg: RunConfig) -> list[str]:
    from .sessions import resolve_task_ids

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
    *, log: Callable[[str], None] | None = None, label: str = "",
) -> dict[str, Any]:
    from patchgym.env.client import AsyncEnvClient

    from .evaluate import run_task_sessions
    from .sessions import sampling_params, session_limits

    params = sampling_params(cfg)
    total = len(task_ids) * samples
    ended: list[Any] = []
    t0 = time.monotonic()

    def on_done(traj: Any) -> None:  # a line per episode: a measurement takes minutes on a CPU
        ended.append(traj)
        if log is not None:
            wins = sum(t.reward > 0 for t in ended)
            log(f"warm-up: {label} {len(ended)}/{total} episodes, {wins} resolved "
                f"(last: {traj.status}, {traj.num_sampled} tokens, {time.monotonic() - t0:.0f} s)")

    async with AsyncEnvClient(env_url, token=cfg.environment.token, busy_retries=20) as env:
        results = await run_task_sessions(env, router, tokenizer, task_ids, samples, params, session_limits(cfg),
                                          concurrency=cfg.eval.sessions, tag="warmup", on_done=on_done)
    trajs = [t for ts in results.values() for t in ts]
    return {
        "tasks": task_ids, "samples_per_task": samples, "episodes": len(trajs),
        "success_rate": sum(t.reward > 0 for t in trajs) / len(trajs),
        "format_error_frac": sum(t.status == "format_error" for t in trajs) / len(trajs),
        "per_task": {t: sum(x.reward > 0 for x in ts) for t, ts in results.items()},
        "statuses": {s: sum(t.status == s for t in trajs) for s in sorted({t.status for t in trajs})},
    }


def measure_key(cfg: RunConfig, task_ids: list[str], eval_ids: list[str]) -> str:
    """The conditions a success rate is measured under, before or after the warm-up: the base model,
    the tasks, the sampling and the limits, the number of samples and the seed (not the warm-up's
    knobs; the rate after is also filed under the warm-up's own key)."""
    blob = json.dumps({"model": resolve(cfg.model.spec).name, "train": task_ids, "eval": eval_ids,
                       "tasks": cfg.environment.tasks, "sampling": cfg.sampling.model_dump(mode="json"),
                       "limits": cfg.limits.model_dump(mode="json"), "samples": cfg.warmup.measure_samples,
                       "seed": cfg.seed, "format": 1})
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _measure_both(cfg: RunConfig, env_url: str, tokenizer: Any, router: Any, task_ids: list[str], eval_ids: list[str],
                  when: str, log: Callable[[str], None]) -> dict[str, Any]:
    t0 = time.monotonic()
    part = {"train": asyncio.run(measure_success(cfg, env_url, tokenizer, router, task_ids, cfg.warmup.measure_samples,
                                                 log=log, label=f"{when}, train tasks:"))}
    if eval_ids:
        part["eval"] = asyncio.run(measure_success(cfg, env_url, tokenizer, router, eval_ids, cfg.warmup.measure_samples,
                                                   log=log, label=f"{when}, held-out tasks:"))
    part["time_s"] = time.monotonic() - t0
    return part


def run_warmup(
    cfg: RunConfig, trainer: Any, tokenizer: Any, env_url: str, *, run_dir: Path | None = None,
    eval_sampler_factory: Callable[[], tuple[Any, list[Any]]] | None = None, log: Callable[[str], None] = print,
    force: bool = False,
) -> dict[str, Any]:
    """Warm the trainer's model up (or load the cached result); returns the report.

    Three caches, each on what its result depends on: the base model's success rate
    (`before-<measure key>.json`), the warmed-up weights (`<warm-up key>/model.safetensors` and
    `report.json`), and the warmed-up model's rate (`<warm-up key>/after-<measure key>.json`), so a
    change of sampling or limits measures again without training again."""
    w = cfg.warmup
    task_ids = warmup_tasks(cfg)
    rows = _task_rows(task_ids, cfg.environment.tasks)
    key = warmup_key(cfg, rows)
    home = patchgym_home() / "warmup"
    cached = home / key
    measure = bool(w.measure and eval_sampler_factory is not None)
    eval_ids: list[str] = []
    if measure:
        from .sessions import resolve_task_ids

        eval_ids = resolve_task_ids(cfg.tasks.eval)
    mkey = measure_key(cfg, task_ids, eval_ids)
    router = samplers = None
    before = None
    if measure:
        # the base model's rate does not depend on the warm-up's knobs: cached on its own key, so
        # that a new warm-up setting does not pay for it again (5.5 minutes of the first cpu-tiny run)
        bpath = home / f"before-{mkey}.json"
        if bpath.exists():
            before = dict(json.loads(bpath.read_text()), cached=True)
            log(f"warm-up: success rate before, from cache {bpath}")
        else:
            router, samplers = eval_sampler_factory()  # type: ignore[misc]  # copies the base weights
            log("warm-up: measuring the success rate before (BF16 sampler)")
            before = _measure_both(cfg, env_url, tokenizer, router, task_ids, eval_ids, "before", log)
            _write_json(bpath, before)

    if (cached / "model.safetensors").exists() and not force:
        report = _load_cached(cached, trainer)
        log(f"warm-up: loaded from cache {cached}")
    else:
        report = _train(cfg, trainer, tokenizer, env_url, rows, key, cached, log)
    if before is not None:
        report["before"] = before
    if measure:
        apath = cached / f"after-{mkey}.json"
        if apath.exists():
            report["after"] = dict(json.loads(apath.read_text()), cached=True)
            log(f"warm-up: success rate after, from cache {apath}")
        else:
            t0 = time.monotonic()
            if router is None:
                router, samplers = eval_sampler_factory()  # type: ignore[misc]  # the warmed-up weights
            else:
                async def refresh() -> None:
                    await asyncio.gather(*(s.update_weights(trainer.weights(), WARMUP_VERSION) for s in samplers))

                asyncio.run(refresh())
            log("warm-up: measuring the success rate after")
            report["after"] = _measure_both(cfg, env_url, tokenizer, router, task_ids, eval_ids, "after", log)
            report["after"]["time_s"] = time.monotonic() - t0
            _write_json(apath, report["after"])
    for s in samplers or []:
        close = getattr(s, "close", None)
        if close:
            close()
    _write_report(run_dir, report)
    return report


def _load_cached(cached: Path, trainer: Any) -> dict[str, Any]:
    from safetensors.torch import load_file

    state = load_file(str(cached / "model.safetensors"))
    missing, unexpected = trainer.model.load_state_dict(state, strict=False)
    if unexpected or any(not m.endswith("lm_head.weight") for m in missing):
        raise ValueError(f"{cached}: cached warm-up does not fit this model (missing {missing[:3]}, unexpected {unexpected[:3]})")
    trainer.version = WARMUP_VERSION
    report = json.loads((cached / "report.json").read_text())
    report.pop("before", None)  # written by older versions; the rates are cached on their own keys now
    report.pop("after", None)
    report["cached"] = True
    return report


def _train(cfg: RunConfig, trainer: Any, tokenizer: Any, env_url: str, rows: list[dict[str, Any]], key: str, cached: Path,
           log: Callable[[str], None]) -> dict[str, Any]:
    from safetensors.torch import save_file

    w = cfg.warmup
    report: dict[str, Any] = {"key": key, "tasks": [r["instance_id"] for r in rows], "steps": w.steps, "lr": w.lr,
                              "batch": w.batch, "temperature": cfg.sampling.temperature, "cached": False}
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

    home = cached.parent
    home.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=home))
    try:
        sd = trainer.model.state_dict()
        state = {k: v.detach().contiguous().clone() for k, v in sd.items()}
        # tied embeddings: one tensor under two names; safetensors stores one
        if "lm_head.weight" in state and "model.embed_tokens.weight" in state and \
                sd["lm_head.weight"].data_ptr() == sd["model.embed_tokens.weight"].data_ptr():
            del state["lm_head.weight"]
        save_file(state, str(tmp / "model.safetensors"))
        (tmp / "report.json").write_text(json.dumps(report, indent=2))
        shutil.rmtree(cached, ignore_errors=True)
        os.replace(tmp, cached)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_lines_atomic(path, [json.dumps(data, indent=2)])


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

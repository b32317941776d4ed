"""One training run end to end, in the order the parts need each other.

Owns `train_run(cfg, run_dir, ...)`: start (or reach) the environment, load the tokenizer and the
model, build the trainer, run the warm-up (cached) when the config asks, build the fleet's
samplers from the warmed-up weights and the router, run the asynchronous loop with its BF16
evaluator, write `summary.json` (`summary.py`), plot the run, stop the environment.
`train_ablation` runs one configuration once per loss, each in a fresh process, into sibling
directories `OUT/<loss>/` and plots them together into `OUT/plots/`.
The CLI (`cli.py`) and `bench/loop` call these; nothing here parses arguments.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from .config import RunConfig

Log = Callable[[str], None]


def _threads(trainer_threads: int | None) -> None:
    import torch

    if trainer_threads:
        torch.set_num_threads(trainer_threads)


def train_run(
    cfg: RunConfig,
    run_dir: Path,
    *,
    resume: bool = False,
    wandb_project: str | None = None,
    progress: bool = True,
    log: Log = print,
    synchronous: bool = False,
    pin: bool = False,
    stop_after: int | None = None,
    plot: bool = True,
    warmup: bool | None = None,
) -> dict[str, Any]:
    from patchgym.rl.fleet.build import build_samplers
    from patchgym.rl.fleet.router import Router
    from patchgym.rl.models import load_model, load_tokenizer

    from .components import Components, build_eval_sampler, build_trainer, pin_threads, scaled_fleet
    from .envserver import EnvServer
    from .evaluate import Evaluator
    from .loop import RLLoop
    from .sessions import resolve_task_ids
    from .warmup import run_warmup

    run_dir = Path(run_dir)
    if not resume:
        set_aside_previous_run(run_dir, log)
    run_dir.mkdir(parents=True, exist_ok=True)
    if pin:
        _threads(1)  # one intra-op thread: each thread's work stays on the core it is pinned to
    task_ids = resolve_task_ids(cfg.tasks.train) + resolve_task_ids(cfg.tasks.eval)
    server = EnvServer(cfg.environment.url, tasks=cfg.environment.tasks, task_ids=task_ids,
                       log_path=run_dir / "envserver.log", token=cfg.environment.token,
                       max_episodes=cfg.environment.max_episodes)
    with server as env_url:
        log(f"environment: {env_url}")
        tokenizer = load_tokenizer(cfg.model.spec)
        model = load_model(cfg.model.spec)
        trainer = build_trainer(cfg, model)
        eval_factory = lambda: build_eval_sampler(trainer.model, cfg.eval.sessions, seed=cfg.seed, tokenizer=tokenizer)  # noqa: E731
        do_warmup = cfg.warmup.enabled if warmup is None else warmup
        if do_warmup and not resume:
            report = run_warmup(cfg, trainer, tokenizer, env_url, run_dir=run_dir, eval_sampler_factory=eval_factory, log=log)
            _log_warmup(report, log)
        fleet = scaled_fleet(cfg)
        samplers = build_samplers(fleet, trainer.model, tokenizer=tokenizer, replicas=cfg.fleet.replicas,
                                  sessions_per_replica=cfg.fleet.sessions_per_replica, version=int(trainer.version),
                                  share_engines=cfg.fleet.share_engines)
        router = Router(samplers, fleet, seed=cfg.seed)
        comps = Components(tokenizer=tokenizer, trainer=trainer, fleet=fleet, samplers={k: list(v) for k, v in samplers.items()},
                           router=router, eval_sampler_factory=eval_factory)
        evaluator = Evaluator(cfg, tokenizer, eval_factory, env_url) if cfg.tasks.eval else None
        if pin and hasattr(os, "sched_setaffinity"):
            cores = sorted(os.sched_getaffinity(0))
            if len(cores) >= 2:
                pinned = pin_threads(("sampler-",), set(cores[:-1]))
                log(f"pinned {len(pinned)} sampler threads to cores {cores[:-1]}; trainer thread to core {cores[-1]}")
                comps.extra["trainer_core"] = cores[-1]
        loop = RLLoop(cfg, run_dir, comps, env_url=env_url, evaluator=evaluator, progress=progress,
                      wandb_project=wandb_project, resume=resume, synchronous=synchronous, stop_after=stop_after)
        if "trainer_core" in comps.extra:
            core = comps.extra["trainer_core"]
            loop._executor.submit(lambda: os.sched_setaffinity(0, {core})).result()
        try:
            result = _run(loop)
        finally:
            for s in comps.all_samplers():
                close = getattr(s, "close", None)
                if close:
                    close()
            if evaluator is not None:
                evaluator.close()
        result["loop"] = loop
        from .summary import summarize_run, summary_lines

        result["summary"] = summarize_run(run_dir, fleet)
        for line in summary_lines(result["summary"]):
            log(line)
    if plot:
        from .plots import plot_runs

        result["plots"] = [str(p) for p in plot_runs([run_dir], run_dir / "plots")]
    return result


def set_aside_previous_run(run_dir: Path, log: Log = print) -> Path | None:
    """A new run into a directory that holds a finished or crashed one (metrics or checkpoints)
    moves the old one to `RUN_DIR.prev-<UTC time>` first: its rows would otherwise be mixed with the
    new run's (`make demo` twice), and nothing finished is ever deleted. Returns the new place."""
    run_dir = Path(run_dir)
    if not ((run_dir / "metrics.jsonl").exists() or (run_dir / "checkpoints").is_dir() and any((run_dir / "checkpoints").iterdir())):
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = run_dir.with_name(f"{run_dir.name}.prev-{stamp}")
    n = 1
    while dest.exists():
        n += 1
        dest = run_dir.with_name(f"{run_dir.name}.prev-{stamp}-{n}")
    os.replace(run_dir, dest)
    log(f"{run_dir} held a previous run: moved it to {dest} (use --resume {run_dir} to continue one instead)")
    return dest


def _run(loop: Any) -> dict[str, Any]:
    import asyncio

    return asyncio.run(loop.run_async())


def _log_warmup(report: dict[str, Any], log: Log) -> None:
    for when in ("before", "after"):
        part = report.get(when)
        if not part:
            continue
        for split in ("train", "eval"):
            if split in part:
                m = part[split]
                log(f"warm-up {when}: {split} success {m['success_rate']:.2f} over {m['episodes']} episodes "
                    f"(format errors {m['format_error_frac']:.2f})")


def _ablation_child(cfg_json: dict[str, Any], run_dir: str, kwargs: dict[str, Any]) -> None:
    from .config import parse_config

    train_run(parse_config(cfg_json, f"{run_dir}/config.json"), Path(run_dir), plot=False, **kwargs)


def train_ablation(cfg: RunConfig, out: Path, losses: Sequence[str], *, log: Log = print, **kwargs: Any) -> dict[str, Any]:
    """The same configuration once per loss into `OUT/<loss>/`, each run in a fresh process of its
    own (spawned), then the runs plotted together into `OUT/plots/`.

    Why a process per run: a run's memory is then the process's and goes back when it ends. The
    four cpu-tiny runs in one process were OOM-killed during the second one (24 GB resident on this
    24 GiB machine; one run peaks at 16.8 GB), since nothing of the first run's fleet, trainer and
    allocator arenas came back. Also, a run that fails leaves the others: it is named in the result
    (`failed`: loss -> exit code) and the rest are still run and plotted. The runs log to this
    process's stdout (their `log` is `print`); `log` here gets the ablation's own lines."""
    import multiprocessing

    from .plots import plot_runs

    out = Path(out)
    context = multiprocessing.get_context("spawn")
    failed: dict[str, int | None] = {}
    for kind in losses:
        sub = cfg.with_loss(kind)
        log(f"ablation: {kind} into {out / kind}")
        child = context.Process(target=_ablation_child, args=(sub.model_dump(mode="json"), str(out / kind), kwargs),
                                name=f"patchgym-ablation-{kind}")
        child.start()
        child.join()
        if child.exitcode != 0:
            failed[kind] = child.exitcode
            log(f"ablation: the {kind} run failed (exit code {child.exitcode}); the other runs go on")
    done = [k for k in losses if k not in failed]
    plots = plot_runs([out / k for k in done], out / "plots") if done else []
    (out / "ablation.json").write_text(json.dumps({"losses": list(losses), "runs": [str(out / k) for k in losses],
                                                   "failed": failed}))
    return {"runs": {k: str(out / k) for k in done}, "failed": failed, "plots": [str(p) for p in plots]}

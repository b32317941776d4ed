"""`patchgym sft`, `patchgym train`, `patchgym eval` and `patchgym plot` (registered in cli/main.py).

Owns the click commands and turning every error a user can fix (a bad config, a missing run
directory, a `k` larger than `n`, wandb not installed) into a `click.ClickException`, printed
without a traceback. The work is done by `runner.py`, `warmup.py`, `evaluate.py` and `plots.py`.

    patchgym train --preset cpu-tiny [--out RUN_DIR] [--set KEY=VALUE ...] [--losses grpo,mis,sc,sc_mis]
    patchgym train --config FILE ...          patchgym train --resume RUN_DIR
    patchgym sft --preset cpu-tiny [--steps N] [--force]
    patchgym eval --checkpoint DIR | --model SPEC --tasks ID,ID|@FILE [--n N] [--k 1,2]
    patchgym plot RUN_DIR [RUN_DIR ...] [--out DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click


def _config(config: Path | None, preset: str | None, overrides: tuple[str, ...]):
    from .config import ConfigError, load_config

    if config is None and preset is None:
        raise click.UsageError("give --config FILE or --preset NAME (e.g. --preset cpu-tiny)")
    if config is not None and preset is not None:
        raise click.UsageError("give --config or --preset, not both")
    try:
        return load_config(config, preset=preset, overrides=list(overrides))
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _echo(text: str) -> None:
    click.echo(text)
    sys.stdout.flush()  # progress lines reach a log file as they happen


def _fail(exc: BaseException) -> click.ClickException:
    return click.ClickException(f"{type(exc).__name__}: {exc}" if not isinstance(exc, (ValueError, FileNotFoundError)) else str(exc))


config_options = [
    click.option("--config", "config", type=click.Path(dir_okay=False, path_type=Path), default=None, help="A run TOML file."),
    click.option("--preset", default=None, help="A bundled preset (cpu-tiny)."),
    click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a config field (repeatable), e.g. batch.prompts=1."),
]


def _with(options):
    def deco(fn):
        for opt in reversed(options):
            fn = opt(fn)
        return fn
    return deco


@click.command("train")
@_with(config_options)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Run directory [default: the config's output_dir].")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Continue the run in this directory from its last checkpoint.")
@click.option("--losses", default=None, help="Ablation: run once per loss (comma-separated) into OUT/<loss>/ and plot them together.")
@click.option("--wandb", "wandb_project", default=None, metavar="PROJECT", help="Also log to Weights & Biases (needs `pip install wandb`).")
@click.option("--no-progress", is_flag=True, help="No progress bar (plain log lines).")
@click.option("--no-warmup", is_flag=True, help="Skip the config's warm-up.")
@click.option("--pin/--no-pin", default=False, show_default=True, help="Pin sampler threads and the trainer thread to separate cores.")
def train(config: Path | None, preset: str | None, overrides: tuple[str, ...], out: Path | None, resume_dir: Path | None,
          losses: str | None, wandb_project: str | None, no_progress: bool, no_warmup: bool, pin: bool) -> None:
    """Run the asynchronous RL loop (a config file or a preset)."""
    from .config import ConfigError, parse_config
    from .runner import train_ablation, train_run

    if resume_dir is not None:
        saved = resume_dir / "config.json"
        if not saved.exists():
            raise click.ClickException(f"{resume_dir}: not a run directory (no config.json)")
        try:
            cfg = parse_config(json.loads(saved.read_text()), str(saved))
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None
        run_dir = resume_dir
    else:
        cfg = _config(config, preset, overrides)
        run_dir = out or Path(cfg.output_dir)
    if wandb_project:
        try:
            import wandb  # noqa: F401
        except ImportError:
            raise click.ClickException("--wandb needs the wandb package, which is not installed: pip install wandb") from None
    kwargs: dict[str, Any] = dict(wandb_project=wandb_project, progress=not no_progress, pin=pin,
                                  warmup=False if no_warmup else None, log=_echo)
    try:
        if losses:
            kinds = [k.strip() for k in losses.split(",") if k.strip()]
            for k in kinds:
                cfg.with_loss(k)  # validates the name
            kwargs.pop("log")
            result = train_ablation(cfg, run_dir, kinds, log=_echo, **kwargs)
            click.echo(f"ablation: {len(kinds) - len(result['failed'])} of {len(kinds)} runs under {run_dir}; "
                       f"plots in {run_dir / 'plots'}")
            if result["failed"]:
                raise click.ClickException("ablation runs that failed: " + ", ".join(
                    f"{k} (exit code {code})" for k, code in result["failed"].items()))
            return
        result = train_run(cfg, run_dir, resume=resume_dir is not None, **kwargs)
    except (ConfigError, FileNotFoundError, ValueError, RuntimeError) as exc:
        raise _fail(exc) from None
    rows = result["rows"]
    last = rows[-1] if rows else {}
    click.echo(f"done: {result['updates']} updates in {run_dir}; last reward {last.get('reward/mean')}, "
               f"pass rate {last.get('pass_rate')}, KL {last.get('kl_k3')}")
    if result.get("eval"):
        ev = result["eval"]
        click.echo("eval (BF16 sampler): " + ", ".join(f"{k} {v:.3f}" for k, v in ev.items() if k.startswith("pass@")))


@click.command("sft")
@_with(config_options)
@click.option("--steps", type=click.IntRange(1, 100_000), default=None, help="Supervised steps [default: the config's warmup.steps].")
@click.option("--force", is_flag=True, help="Train again even when the result is cached.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Write warmup.json here too.")
def sft(config: Path | None, preset: str | None, overrides: tuple[str, ...], steps: int | None, force: bool, out: Path | None) -> None:
    """Supervised warm-up on expert trajectories the environment produces (cached by model and data)."""
    from patchgym.rl.models import load_model, load_tokenizer

    from .components import build_eval_sampler, build_trainer
    from .envserver import EnvServer
    from .sessions import resolve_task_ids
    from .warmup import run_warmup

    cfg = _config(config, preset, overrides)
    if steps is not None:
        cfg = cfg.model_copy(update={"warmup": cfg.warmup.model_copy(update={"steps": steps})})
    try:
        ids = resolve_task_ids(cfg.tasks.train) + resolve_task_ids(cfg.tasks.eval)
        log_dir = out or Path(cfg.output_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        with EnvServer(cfg.environment.url, tasks=cfg.environment.tasks, task_ids=ids, log_path=log_dir / "envserver.log",
                       token=cfg.environment.token) as url:
            tokenizer = load_tokenizer(cfg.model.spec)
            trainer = build_trainer(cfg, load_model(cfg.model.spec))
            report = run_warmup(cfg, trainer, tokenizer, url, run_dir=log_dir, force=force, log=_echo,
                                eval_sampler_factory=lambda: build_eval_sampler(trainer.model, cfg.eval.sessions, tokenizer=tokenizer))
    except (ValueError, RuntimeError, FileNotFoundError) as exc:
        raise _fail(exc) from None
    from .runner import _log_warmup

    _log_warmup(report, click.echo)
    click.echo(f"warm-up {'loaded from cache' if report.get('cached') else 'trained'}: key {report.get('key')}")


@click.command("eval")
@click.option("--checkpoint", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="A checkpoint directory of a run (RUN_DIR/checkpoints/update-XXXX) or a run directory (its latest).")
@click.option("--model", "model_spec", default=None, help="A model spec (smollm2-135m-instruct or a local HF directory).")
@click.option("--tasks", "tasks_arg", required=True, help="Task ids, comma-separated, or @FILE (a JSONL task file).")
@click.option("--n", "n", type=click.IntRange(1, 10_000), default=4, show_default=True, help="Samples per task.")
@click.option("--k", "ks", default="1", show_default=True, help="k values, comma-separated (each <= n).")
@click.option("--env", "env_url", default="bundled", show_default=True, help="An environment URL, or bundled.")
@click.option("--env-tasks", default="bundled", show_default=True, help="What a bundled environment serves.")
@click.option("--temperature", type=float, default=0.5, show_default=True)
@click.option("--max-turns", type=click.IntRange(1, 1000), default=4, show_default=True)
@click.option("--max-tokens-per-turn", type=click.IntRange(1, 1 << 20), default=128, show_default=True)
@click.option("--max-context", type=click.IntRange(64, 1 << 22), default=3072, show_default=True)
@click.option("--sessions", type=click.IntRange(1, 256), default=4, show_default=True, help="Concurrent sessions of the BF16 sampler.")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Append the row to this eval.jsonl.")
def evaluate(checkpoint: Path | None, model_spec: str | None, tasks_arg: str, n: int, ks: str, env_url: str, env_tasks: str,
             temperature: float, max_turns: int, max_tokens_per_turn: int, max_context: int, sessions: int, out: Path | None) -> None:
    """pass@k of a checkpoint or a model on a task set, always with a BF16 sampler."""
    import asyncio

    from .config import ConfigError, parse_config

    if (checkpoint is None) == (model_spec is None):
        raise click.UsageError("give exactly one of --checkpoint DIR or --model SPEC")
    try:
        k_list = [int(k) for k in ks.split(",") if k.strip()]
    except ValueError:
        raise click.BadParameter(f"{ks!r} is not a comma-separated list of integers", param_hint="--k") from None
    bad = [k for k in k_list if k < 1 or k > n]
    if bad or not k_list:
        raise click.BadParameter(f"every k must be in 1..n={n} (k <= n samples per task); got {ks}", param_hint="--k")
    task_list = [tasks_arg] if tasks_arg.startswith("@") else [t.strip() for t in tasks_arg.split(",") if t.strip()]
    state = None
    spec = model_spec
    if checkpoint is not None:
        ckpt = checkpoint
        if (checkpoint / "checkpoints" / "latest").exists():
            ckpt = checkpoint / "checkpoints" / (checkpoint / "checkpoints" / "latest").read_text().strip()
        if not (ckpt / "model.safetensors").exists():
            raise click.ClickException(f"{checkpoint}: not a checkpoint (no model.safetensors) nor a run directory with checkpoints/latest")
        run_cfg = ckpt.parent.parent / "config.json"
        spec = json.loads(run_cfg.read_text())["model"]["spec"] if run_cfg.exists() else "smollm2-135m-instruct"
        from patchgym.rl.trainer import checkpoint as ckpt_mod

        state = ckpt_mod.read(ckpt)["model_state"]
    try:
        cfg = parse_config({
            "name": "eval", "model": {"spec": spec}, "environment": {"url": env_url, "tasks": env_tasks},
            "tasks": {"train": ["-"], "eval": task_list},
            "sampling": {"temperature": temperature},
            "limits": {"max_turns": max_turns, "max_tokens_per_turn": max_tokens_per_turn, "max_context": max_context},
            "eval": {"n": n, "k": k_list, "sessions": sessions},
        }, "patchgym eval")
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    from patchgym.rl.models import load_model, load_tokenizer

    from .components import build_eval_sampler
    from .envserver import EnvServer
    from .evaluate import Evaluator
    from .sessions import resolve_task_ids

    try:
        ids = resolve_task_ids(task_list)
        tokenizer = load_tokenizer(spec)
        model = load_model(spec)
        if state is not None:
            missing, unexpected = model.load_state_dict(state, strict=False)
            if unexpected:
                raise ValueError(f"{checkpoint}: checkpoint does not fit model {spec!r} (unexpected {unexpected[:3]})")
        with EnvServer(env_url, tasks=env_tasks, task_ids=ids) as url:
            ev = Evaluator(cfg, tokenizer, lambda: build_eval_sampler(model, sessions, tokenizer=tokenizer), url)
            try:
                row = asyncio.run(ev({k: v for k, v in model.state_dict().items()}, 0, update=0))
            finally:
                ev.close()
    except (ValueError, RuntimeError, FileNotFoundError) as exc:
        raise _fail(exc) from None
    row["model"] = str(checkpoint or spec)
    if out is not None:
        from .metrics import MetricsWriter

        MetricsWriter(out).write(row)
    click.echo(json.dumps({k: v for k, v in row.items()}, indent=None))


@click.command("plot")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the PNGs go [default: RUN_DIR/plots for one run, ./plots for several].")
def plot(run_dirs: tuple[Path, ...], out: Path | None) -> None:
    """Plot the curves of one or more runs, overlaid and labelled by run and loss."""
    from .plots import PlotError, plot_runs

    target = out or (run_dirs[0] / "plots" if len(run_dirs) == 1 else Path("plots"))
    try:
        written = plot_runs(list(run_dirs), target)
    except PlotError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {len(written)} PNG(s) to {target}")

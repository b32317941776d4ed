"""`patchgym fleet list|show|check`: the bundled fleets, one fleet's groups, and their mismatch.

Owns the click group `fleet` (registered in `cli/main.py`). `list` and `show` read fleet files only
(no torch import); `check` loads the model and runs `check.py`. A fleet that cannot be loaded is a
`FleetError` (a click.ClickException): printed as its one-line message, no traceback.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from .load import FleetError, bundled_fleets, load_fleet
from .model import Fleet, Group


@click.group("fleet")
def fleet() -> None:
    """List, show and check sampler fleets (formats, capacity, price, mismatch against the trainer)."""


@fleet.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line instead of text.")
def list_fleets(as_json: bool) -> None:
    """The bundled fleets, one line each."""
    for name, path in bundled_fleets().items():
        spec = load_fleet(path)
        if as_json:
            click.echo(json.dumps({"name": name, "groups": len(spec.groups), "capacity": capacity(spec),
                                   "gpus": gpus(spec), "description": spec.description, "path": str(path)}))
        else:
            click.echo(f"{name:<16} {len(spec.groups):>2} groups  {capacity(spec):>5} sessions  "
                       f"{gpus(spec):>4} GPUs  {spec.description}")


def capacity(spec: Fleet) -> int:
    return sum(group.capacity for group in spec.groups)


def gpus(spec: Fleet) -> int:
    return sum(group.replicas * group.gpus_per_replica for group in spec.groups)


def kernel_text(group: Group) -> str:
    parts = []
    if group.kernel.accumulate != "fp32":
        parts.append(f"accumulate={group.kernel.accumulate}")
    if group.kernel.attention_splits != 1:
        parts.append(f"splits={group.kernel.attention_splits}")
    return ", ".join(parts) or "default"


def group_row(group: Group) -> dict[str, Any]:
    """The fields `show --json` prints for one group."""
    return {
        "group": group.name,
        "accelerator": group.accelerator,
        "weights": group.weights,
        "activations": group.activations,
        "kv_cache": group.kv_cache,
        "backend": group.backend,
        "replicas": group.replicas,
        "sessions_per_replica": group.sessions_per_replica,
        "capacity": group.capacity,
        "price_per_gpu_hour": group.price_per_gpu_hour,
        "gpus_per_replica": group.gpus_per_replica,
        "kernel": group.kernel.model_dump(),
    }


@fleet.command("show")
@click.argument("fleet_spec", metavar="FLEET")
@click.option("--json", "as_json", is_flag=True, help="The fleet as JSON instead of a table.")
def show(fleet_spec: str, as_json: bool) -> None:
    """One fleet's groups: formats, backend, replicas, capacity, price, kernel variant.

    FLEET is a bundled fleet's name (see `patchgym fleet list`) or a TOML file."""
    spec = load_fleet(fleet_spec)
    if as_json:
        click.echo(json.dumps({"name": spec.name, "description": spec.description, "capacity": capacity(spec),
                               "gpus": gpus(spec), "groups": [group_row(g) for g in spec.groups]}, indent=2))
        return
    total = capacity(spec)
    table = Table(title=f"{spec.name}: {spec.description}" if spec.description else spec.name)
    for column, justify in [("group", "left"), ("accelerator", "left"), ("weights", "left"), ("act", "left"),
                            ("KV", "left"), ("backend", "left"), ("replicas", "right"), ("sessions", "right"),
                            ("capacity", "right"), ("share", "right"), ("$/GPU-h", "right"),
                            ("GPUs/replica", "right"), ("kernel", "left")]:
        table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for g in spec.groups:
        table.add_row(g.name, g.accelerator, g.weights, g.activations, g.kv_cache, g.backend, str(g.replicas),
                      str(g.sessions_per_replica), str(g.capacity), f"{g.capacity / total:.1%}",
                      f"{g.price_per_gpu_hour:.2f}", str(g.gpus_per_replica), kernel_text(g))
    table.caption = f"{len(spec.groups)} groups, {total} sessions, {gpus(spec)} GPUs"
    print_wide(table)


def print_wide(renderable: Any) -> None:
    """Print to stdout as wide as the table needs: a pipe or a narrow terminal gets long lines
    rather than wrapped or cut cells."""
    console = Console()
    needed = Measurement.get(console, console.options.update(width=10_000), renderable).maximum
    Console(width=max(console.width, needed)).print(renderable)


@fleet.command("check")
@click.argument("fleet_spec", metavar="FLEET")
@click.option("--model", "model_spec", default=None, help="A known model name or a local Hugging Face model directory (default: smollm2-135m-instruct).")
@click.option("--prompts", default=8, show_default=True, type=click.IntRange(1, 256), help="Fixed prompts to teacher-force.")
@click.option("--tokens", default=48, show_default=True, type=click.IntRange(1, 4096), help="Response tokens per prompt (sampled once from the trainer's weights).")
@click.option("--low", default=0.5, show_default=True, type=float, help="Lower end of MIS's band for p/q.")
@click.option("--high", default=5.0, show_default=True, type=float, help="Upper end of MIS's band for p/q.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the responses and of the tokens sampled from q.")
@click.option("--threads", default=None, type=click.IntRange(1, 512), help="torch CPU threads (default: torch's own choice).")
@click.option("--json", "as_json", is_flag=True, help="The report as JSON (the progress bar still goes to stderr).")
def check(fleet_spec: str, model_spec: str | None, prompts: int, tokens: int, low: float, high: float,
          seed: int, threads: int | None, as_json: bool) -> None:
    """Each group's mismatch against the trainer's weights on fixed prompts (teacher-forced).

    Reports the relative weight error, mean per-token KL(q||p) exact and its k3 estimate, top-1
    agreement, the fraction of tokens whose p/q falls outside [LOW, HIGH], and for MoE models the
    agreement of the routed experts."""
    if not 0 < low < 1 < high:
        raise click.BadParameter(f"the band must satisfy 0 < low < 1 < high (got [{low}, {high}])", param_hint="--low/--high")
    spec = load_fleet(fleet_spec)
    from . import check as checking  # torch and transformers only for this command

    if threads is not None:
        import torch

        # why: on a machine shared with other jobs, torch's default (one thread per core) spins
        # against them; one thread measured 0.06 s CPU per decode step vs 0.7 s with two at load 20.
        torch.set_num_threads(threads)

    stderr = Console(stderr=True)
    try:
        with checking.progress_bar(stderr) as advance:
            report = checking.check_fleet(spec, model_spec, prompts=prompts, tokens=tokens, band=(low, high),
                                          seed=seed, progress=advance)
    except checking.CheckError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        print_wide(checking.report_table(report))
        for line in report.ordering_violations():
            stderr.print(f"[yellow]warning:[/] {line}")


# `fleet deploy FLEET --modal` / `fleet stop FLEET` (scale-out; they import Modal only when run)
from patchgym.rl.deploy.cli import deploy as _deploy, stop as _stop  # noqa: E402

fleet.add_command(_deploy)
fleet.add_command(_stop)

__all__ = ["fleet", "FleetError"]

"""`patchgym tasks list|prepare|export TASKS` (and `validate`, which the grader adds: see patchgym.main).

TASKS is a JSONL file, a v5 task directory, or the word `bundled` (the default).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from patchgym.tasks.loaders import TaskFileError, load_tasks, select
from patchgym.tasks.model import Task

console = Console(stderr=True)


def load_or_fail(spec: str, ids: tuple[str, ...] = ()) -> list[Task]:
    """Load a task set for a command; every problem becomes a one-line error, not a traceback."""
    try:
        return select(load_tasks(spec), ids)
    except (TaskFileError, KeyError) as exc:
        raise click.ClickException(str(exc).strip("'\"")) from None
    except Exception as exc:  # e.g. the bundled suite failed to build
        raise click.ClickException(f"cannot load tasks from {spec}: {exc}") from None


tasks_argument = click.argument("tasks_spec", metavar="[TASKS]", default="bundled", required=False)
ids_option = click.option("--id", "ids", multiple=True, help="Only this task (repeatable).")


@click.group()
def tasks() -> None:
    """List, prepare and validate task sets (TASKS: a .jsonl file, a task directory, or `bundled`)."""


@tasks.command("list")
@tasks_argument
@click.option("--json", "as_json", is_flag=True, help="One JSON object per task (public fields only).")
def list_tasks(tasks_spec: str, as_json: bool) -> None:
    """List the tasks of a task set."""
    loaded = load_or_fail(tasks_spec)
    if as_json:
        import json

        for task in loaded:
            row = task.public_view()
            row["difficulty"] = task.difficulty
            click.echo(json.dumps(row))
        return
    table = Table(title=f"{len(loaded)} task(s) from {tasks_spec}")
    for column in ("instance_id", "repo", "difficulty", "F2P", "P2P", "base"):
        table.add_column(column)
    for task in loaded:
        table.add_row(task.instance_id, task.repo, task.difficulty or "-", str(len(task.FAIL_TO_PASS)),
                      str(len(task.PASS_TO_PASS)), task.base_commit[:10])
    Console(width=None if sys.stdout.isatty() else 200).print(table)


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=False)


@tasks.command("prepare")
@tasks_argument
@ids_option
@click.option("--workers", default=2, show_default=True, type=click.IntRange(min=1), help="Tasks prepared in parallel.")
@click.option("--store", type=click.Path(path_type=Path), default=None,
              help="Task store (default $PATCHGYM_HOME/tasks).")
@click.option("--force", is_flag=True, help="Prepare again even when a cached preparation exists.")
def prepare(tasks_spec: str, ids: tuple[str, ...], workers: int, store: Path | None, force: bool) -> None:
    """Scrub each task's repository at base_commit and build its environment (cached)."""
    from patchgym.tasks.environment import python_version_mismatch
    from patchgym.tasks.prepare import PrepareError, prepare_tasks

    loaded = load_or_fail(tasks_spec, ids)
    with progress_bar() as progress:
        bar = progress.add_task("preparing", total=len(loaded))

        def on_done(task, prepared, error) -> None:
            mismatch = python_version_mismatch(task)
            if mismatch:
                progress.console.print(f"[yellow]warning[/] {escape(mismatch)}")
            mark = "[green]ok[/]" if error is None else "[red]failed[/]"
            progress.console.print(f"{mark} {escape(task.instance_id)}" + (f" -> {escape(str(prepared.root))}" if prepared else ""))
            progress.advance(bar)

        try:
            prepare_tasks(loaded, store, workers=workers, force=force, on_done=on_done)
        except PrepareError as exc:
            raise click.ClickException(str(exc)) from None
    click.echo(f"prepared {len(loaded)}/{len(loaded)}")


def export_row(task: Task) -> dict:
    """A task as a full SWE-bench row: every field of the task model (the gold `patch` and the
    `test_patch` included, unknown fields kept), the test lists as strings holding JSON lists."""
    import json

    row = task.model_dump(mode="json")
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        row[key] = json.dumps(row[key])
    return row


@tasks.command("export")
@tasks_argument
@ids_option
@click.option("--out", "out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the JSONL here (default: standard output).")
def export(tasks_spec: str, ids: tuple[str, ...], out: Path | None) -> None:
    """Write a task set's full rows (gold patch and test patch included) as SWE-bench JSONL.

    These rows hold the answers: they are for building expert trajectories and for offline
    grading, never for what an agent sees."""
    import json

    loaded = load_or_fail(tasks_spec, ids)
    text = "".join(json.dumps(export_row(task), ensure_ascii=False) + "\n" for task in loaded)
    if out is None:
        click.echo(text, nl=False)
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
    except OSError as exc:
        raise click.ClickException(f"cannot write {out}: {exc.strerror or exc}") from None
    console.print(f"exported {len(loaded)} task(s) to {out}")

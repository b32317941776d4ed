"""`patchgym grade` (offline grading of SWE-bench-style predictions) and `patchgym tasks validate`.

`grade` writes one report.json per prediction and per-model summaries under `--out/--run-id`
(layout in patchgym.harness.store), shows a progress bar, and ends with `resolved R/N`. It is
resumable: rerunning the same command grades only what has no report yet; `--force` regrades.
`validate` is added to the `tasks` group by the root CLI (patchgym.main): tasks cannot import the
harness.
"""

from __future__ import annotations

import json
import sys
import os
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console(stderr=True)

BACKENDS = ["local", "docker", "modal"]


IMAGE_HELP = ("Container image (docker, modal) for tasks without environment.image [default: docker builds one "
              "per task from its environment.setup on patchgym's base image].")


def _factory(backend: str, image: str | None = None):
    from patchgym.harness.sandbox.base import get_factory

    if image and backend == "local":
        raise click.BadParameter("--image is for the docker and modal backends (local runs on this machine)",
                                 param_hint="--image")
    try:
        return get_factory(backend, **({"default_image": image} if image else {}))
    except Exception as exc:  # a backend that cannot start here: missing engine, credentials, module
        raise click.ClickException(f"the {backend} sandbox backend is not available: {exc}") from None


class _closing:
    """Close every sandbox a factory still holds when the command ends (and the local factory's
    state directory with it), however it ends."""

    def __init__(self, factory) -> None:
        self.factory = factory

    def __enter__(self):
        return self.factory

    def __exit__(self, *exc: object) -> None:
        self.factory.close_all()
        shutdown = getattr(self.factory, "shutdown", None)
        if shutdown is not None:
            shutdown()


def _preparer(store: Path | None):
    from patchgym.tasks.prepare import prepare_task

    return lambda task: prepare_task(task, store)


def _default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def _run_id_for(predictions: str) -> str:
    if predictions == "gold":
        return "gold"
    stem = Path(predictions).name
    for suffix in (".jsonl", ".json"):
        stem = stem.removesuffix(suffix)
    return stem or "run"


@click.command("grade")
@click.option("--tasks", "tasks_spec", required=True, metavar="TASKS",
              help="A .jsonl task file, a v5 task directory, or `bundled`.")
@click.option("--predictions", "predictions_spec", required=True, metavar="PREDS",
              help="SWE-bench predictions (.jsonl or .json), or `gold` for the tasks' own patches.")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Predictions graded in parallel [default: min(4, cores)].")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=Path("patchgym-runs"), show_default=True,
              help="Where reports and logs go.")
@click.option("--run-id", default=None, help="Subfolder of --out for this run [default: the predictions file name, or `gold`].")
@click.option("--backend", type=click.Choice(BACKENDS), default="local", show_default=True)
@click.option("--image", default=None, help=IMAGE_HELP)
@click.option("--force", is_flag=True, help="Grade again even predictions that already have a report.")
@click.option("--id", "ids", multiple=True, help="Only this instance (repeatable).")
@click.option("--deadline", "deadline_s", type=click.FloatRange(min=1), default=900, show_default=True,
              help="Seconds for grading one prediction, sandbox start and teardown included.")
@click.option("--store", type=click.Path(path_type=Path), default=None, help="Task store [default: $PATCHGYM_HOME/tasks].")
def grade(tasks_spec: str, predictions_spec: str, workers: int | None, out_dir: Path, run_id: str | None, backend: str,
          force: bool, ids: tuple[str, ...], deadline_s: float, store: Path | None, image: str | None = None) -> None:
    """Grade predictions in fresh sandboxes; resolved only when every FAIL_TO_PASS and PASS_TO_PASS test passes."""
    from patchgym.harness.batch import grade_predictions
    from patchgym.harness.predictions import PredictionsError, load_predictions
    from patchgym.harness.store import ResultStore
    from patchgym.tasks.cli import load_or_fail, progress_bar

    tasks = load_or_fail(tasks_spec, ids)
    try:
        predictions = load_predictions(predictions_spec, tasks)
    except PredictionsError as exc:
        raise click.ClickException(str(exc)) from None
    if ids:
        predictions = [p for p in predictions if p.instance_id in set(ids)]
    if not predictions:
        raise click.ClickException("no predictions to grade")
    run_id = run_id or _run_id_for(predictions_spec)
    result_store = ResultStore(out_dir, run_id)
    factory = _factory(backend, image)
    with _closing(factory), progress_bar() as progress:
        bar = progress.add_task("grading", total=len(predictions))

        def on_done(prediction, entry, reused) -> None:
            if not reused:
                colour = {"resolved": "green", "unresolved": "yellow", "empty_patch": "dim"}.get(entry["status"], "red")
                who = f"{prediction.model}/" if prediction.model != "gold" else ""
                progress.console.print(f"[{colour}]{entry['status']}[/] {escape(who + prediction.instance_id)}"
                                       + (f"  ({escape(str(entry['error']))})" if entry.get("error") and entry["status"] != "empty_patch" else ""))
            progress.advance(bar)

        result = grade_predictions(tasks, predictions, result_store, _preparer(store), workers=workers or _default_workers(),
                                   factory=factory, deadline_s=deadline_s, force=force, on_done=on_done)
    if result.reused:
        console.print(f"{result.reused} prediction(s) already graded in {result_store.root} (reused; --force to regrade)")
    console.print(f"reports: {result_store.root}")
    models = list(result.summaries)
    if len(models) > 1:
        for model in models:
            s = result.summaries[model]
            click.echo(f"{model}: resolved {s['resolved_instances']}/{s['submitted_instances']}")
    total = sum(s["submitted_instances"] for s in result.summaries.values())
    click.echo(f"resolved {result.resolved()}/{total}")


@click.command("validate")
@click.argument("tasks_spec", metavar="[TASKS]", default="bundled", required=False)
@click.option("--id", "ids", multiple=True, help="Only this task (repeatable).")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Tasks validated in parallel [default: min(4, cores)].")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Runs of each patch, to find flaky tests.")
@click.option("--backend", type=click.Choice(BACKENDS), default="local", show_default=True)
@click.option("--image", default=None, help=IMAGE_HELP)
@click.option("--deadline", "deadline_s", type=click.FloatRange(min=1), default=900, show_default=True)
@click.option("--store", type=click.Path(path_type=Path), default=None, help="Task store [default: $PATCHGYM_HOME/tasks].")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Also write the results as JSON here.")
def validate(tasks_spec: str, ids: tuple[str, ...], workers: int | None, repeat: int, backend: str, deadline_s: float,
             store: Path | None, json_path: Path | None, image: str | None = None) -> None:
    """Check with the grader that each task's gold patch resolves it, the empty patch does not, and
    that results are stable across --repeat runs (flaky tests reported)."""
    from patchgym.harness.validate import validate_tasks
    from patchgym.tasks.cli import load_or_fail, progress_bar

    tasks = load_or_fail(tasks_spec, ids)
    factory = _factory(backend, image)
    with _closing(factory), progress_bar() as progress:
        bar = progress.add_task("validating", total=len(tasks))

        def on_done(validation) -> None:
            mark = "[green]ok[/]" if validation.ok else "[red]invalid[/]"
            progress.console.print(f"{mark} {escape(validation.instance_id)}")
            progress.advance(bar)

        results = validate_tasks(tasks, _preparer(store), workers=workers or _default_workers(), repeat=repeat,
                                 factory=factory, deadline_s=deadline_s, on_done=on_done)
    table = Table(title=f"validation of {len(results)} task(s), {repeat} run(s) per patch")
    for column in ("instance_id", "gold", "empty", "flaky", "problems"):
        table.add_column(column, overflow="fold")
    for v in results:
        # Escaped: a parametrised test id's `[...]` is not rich markup (it used to vanish from the table).
        table.add_row(escape(v.instance_id), ",".join(v.gold) or "-", ",".join(v.empty) or "-", str(len(v.flaky)),
                      escape("\n".join(v.problems)) or "-")
    Console(width=None if sys.stdout.isatty() else 200).print(table)  # full ids in logs and pipes
    if json_path:
        json_path.write_text(json.dumps([v.as_dict() for v in results], indent=2))
    bad = [v for v in results if not v.ok]
    if bad:
        raise click.ClickException(f"{len(bad)} of {len(results)} task(s) failed validation: "
                                   + ", ".join(v.instance_id for v in bad))
    click.echo(f"valid {len(results)}/{len(results)}")

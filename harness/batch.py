"""Grading many predictions in parallel, resumably: the engine under `patchgym grade`.

`grade_predictions` runs each prediction that has no valid stored report (patchgym.harness.store)
on a thread pool: prepare its task (cached, thread-safe), grade it in a fresh sandbox, and store its
report.json atomically the moment it is done. A killed run loses only what was in flight; a rerun
grades only what is missing, `force=True` grades everything again. Summaries are written at the end
(and can be rebuilt at any time from the stored reports).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from patchgym.harness.grader import default_factory, grade_patch
from patchgym.harness.predictions import GOLD, Prediction
from patchgym.harness.report import instance_report, summary
from patchgym.harness.sandbox.base import SandboxFactory
from patchgym.harness.store import ResultStore, write_json_atomic
from patchgym.harness.verdict import F2P, MISSING, P2P, Verdict
from patchgym.tasks.model import Task
from patchgym.tasks.patches import is_empty_patch
from patchgym.tasks.prepared import PreparedTask

Preparer = Callable[[Task], PreparedTask]
OnDone = Callable[[Prediction, dict[str, Any], bool], None]  # (prediction, report entry, reused)


@dataclass
class BatchResult:
    entries: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (model, id) -> entry
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    graded: int = 0
    reused: int = 0

    def resolved(self, model: str | None = None) -> int:
        return sum(1 for (m, _), e in self.entries.items() if (model is None or m == model) and e.get("resolved"))


def _not_run_verdict(task: Task, status: str, error: str | None) -> Verdict:
    return Verdict(status=status, error=error, instance_id=task.instance_id,
                   tests={F2P: {t: MISSING for t in task.FAIL_TO_PASS}, P2P: {t: MISSING for t in task.PASS_TO_PASS}})


def grade_one(task: Task, prediction: Prediction, prepare: Preparer, store: ResultStore, *,
              factory: SandboxFactory, deadline_s: float) -> dict[str, Any]:
    log_dir = store.item_dir(prediction)
    if is_empty_patch(prediction.patch):
        verdict = _not_run_verdict(task, "empty_patch", "the prediction holds no patch")
    else:
        try:
            prepared = prepare(task)
        except Exception as exc:  # noqa: BLE001  a task that cannot be prepared is an infrastructure error
            verdict = _not_run_verdict(task, "infra_error", f"could not prepare the task: {exc}")
        else:
            # The task's own gold patch is trusted with binary hunks; predictions are not.
            verdict = grade_patch(prepared, prediction.patch, factory=factory, deadline_s=deadline_s, log_dir=log_dir,
                                  allow_binary=prediction.model == GOLD and prediction.patch == task.patch)
    report = instance_report(prediction, verdict)
    store.save(prediction, report)
    return report[prediction.instance_id]


def grade_predictions(
    tasks: list[Task],
    predictions: list[Prediction],
    store: ResultStore,
    prepare: Preparer,
    *,
    workers: int = 1,
    factory: SandboxFactory | None = None,
    deadline_s: float = 900,
    force: bool = False,
    on_done: OnDone | None = None,
) -> BatchResult:
    by_id = {task.instance_id: task for task in tasks}
    result = BatchResult()
    pending: list[Prediction] = []
    for prediction in predictions:
        stored = None if force else store.load(prediction)
        if stored is not None:
            entry = stored[prediction.instance_id]
            result.entries[(prediction.model, prediction.instance_id)] = entry
            result.reused += 1
            if on_done:
                on_done(prediction, entry, True)
        else:
            pending.append(prediction)

    factory = factory or default_factory()
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="patchgym-grade")
    try:
        futures = {pool.submit(grade_one, by_id[p.instance_id], p, prepare, store, factory=factory,
                               deadline_s=deadline_s): p for p in pending}
        for future in as_completed(futures):
            prediction = futures[future]
            entry = future.result()
            result.entries[(prediction.model, prediction.instance_id)] = entry
            result.graded += 1
            if on_done:
                on_done(prediction, entry, False)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        factory.close_all()
        raise
    pool.shutdown(wait=True)
    write_summaries(tasks, predictions, store, result)
    return result


def write_summaries(tasks: list[Task], predictions: list[Prediction], store: ResultStore, result: BatchResult) -> None:
    task_ids = [task.instance_id for task in tasks]
    models = list(dict.fromkeys(p.model for p in predictions))
    for model in models:
        reports = {iid: entry for (m, iid), entry in result.entries.items() if m == model}
        result.summaries[model] = summary(model, task_ids, predictions, reports)
        write_json_atomic(store.model_dir(model) / "summary.json", result.summaries[model])
    write_json_atomic(Path(store.root) / "summary.json", result.summaries)

"""Validating tasks with the grader: the gold patch resolves, the empty patch does not, stably.

For each task, `validate_task` grades the gold patch and the empty patch (tests run, with
`test_patch` applied) `repeat` times each, in fresh sandboxes, and reports:
- `gold_not_resolved`: a gold run that is not resolved (with the failing tests, and where its test
  log is kept: `default_log_root`);
- `f2p_passes_without_fix`: a FAIL_TO_PASS test that passes with the empty patch;
- `p2p_fails_without_fix`: a PASS_TO_PASS test that fails with the empty patch;
- `flaky`: a test whose status differs between repeated runs of the same patch;
- `no_gold_patch`: nothing to validate with.
A task is valid when none of these is reported.
"""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from patchgym.harness.grader import default_factory, grade_patch
from patchgym.harness.sandbox.base import SandboxFactory
from patchgym.harness.verdict import F2P, P2P, Verdict, f2p_passes, p2p_passes
from patchgym.tasks.model import Task
from patchgym.tasks.prepared import PreparedTask


@dataclass
class TaskValidation:
    instance_id: str
    problems: list[str] = field(default_factory=list)
    gold: list[str] = field(default_factory=list)  # status of each gold run
    empty: list[str] = field(default_factory=list)  # "fails" / "passes" for each empty run
    flaky: dict[str, list[str]] = field(default_factory=dict)  # test id -> statuses seen
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        return {"instance_id": self.instance_id, "ok": self.ok, "problems": self.problems, "gold": self.gold,
                "empty": self.empty, "flaky": self.flaky, "seconds": round(self.seconds, 3)}


def _flaky(runs: list[Verdict]) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    for verdict in runs:
        for group in (F2P, P2P):
            for test_id, status in verdict.tests.get(group, {}).items():
                seen.setdefault(test_id, []).append(status)
    return {test_id: statuses for test_id, statuses in seen.items() if len(set(statuses)) > 1}


def default_log_root(instance_id: str) -> Path:
    """Where the test logs of a gold run that failed validation are kept:
    `$PATCHGYM_HOME/validation/<instance_id>/<UTC time>-<pid>/gold-<run>/` (the patch, the test
    command's output, the structured results: what the grader writes with a log_dir)."""
    from patchgym.tasks.store import patchgym_home

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return patchgym_home() / "validation" / instance_id / f"{stamp}-{os.getpid()}"


def validate_task(prepared: PreparedTask, *, repeat: int = 1, factory: SandboxFactory | None = None,
                  deadline_s: float = 900, log_root: Path | None = None) -> TaskValidation:
    """Validate one prepared task. A gold run that does not resolve keeps its test log under
    `log_root` (default `default_log_root`), named in its problem; logs of resolved runs are removed."""
    task = prepared.task
    out = TaskValidation(task.instance_id)
    factory = factory or default_factory()
    gold_runs: list[Verdict] = []
    if not task.patch:
        out.problems.append("no_gold_patch: the task has no `patch` to validate with")
    else:
        root = Path(log_root) if log_root is not None else default_log_root(task.instance_id)
        for run in range(max(1, repeat)):
            log_dir = root / f"gold-{run + 1}"
            verdict = grade_patch(prepared, task.patch, factory=factory, deadline_s=deadline_s, allow_binary=True,
                                  log_dir=log_dir)
            gold_runs.append(verdict)
            out.gold.append(verdict.status)
            out.seconds += verdict.durations.get("total", 0.0)
            if verdict.status == "resolved":
                shutil.rmtree(log_dir, ignore_errors=True)
                continue
            detail = verdict.error or ", ".join(f"{t}={s}" for g in (F2P, P2P)
                                                for t, s in verdict.tests[g].items()
                                                if not (f2p_passes(s) if g == F2P else p2p_passes(s)))
            flags = [f for f in verdict.flags if not f.startswith("note:")]
            kept = f" (test log: {log_dir})" if log_dir.is_dir() else ""
            out.problems.append(f"gold_not_resolved: {verdict.status}: {detail}" + (f" (flags: {flags})" if flags else "")
                                + kept)
        if root.is_dir() and not any(root.iterdir()):
            root.rmdir()
    empty_runs: list[Verdict] = []
    for _ in range(max(1, repeat)):
        verdict = grade_patch(prepared, "", factory=factory, deadline_s=deadline_s, run_empty=True)
        empty_runs.append(verdict)
        out.seconds += verdict.durations.get("total", 0.0)
        out.empty.append("passes" if verdict.tests_pass() else "fails")
        passing_f2p = [t for t, s in verdict.tests[F2P].items() if f2p_passes(s)]
        failing_p2p = [t for t, s in verdict.tests[P2P].items() if not p2p_passes(s)]
        if passing_f2p:
            out.problems.append(f"f2p_passes_without_fix: {', '.join(passing_f2p)}")
        if failing_p2p:
            out.problems.append(f"p2p_fails_without_fix: {', '.join(failing_p2p)}")
    out.problems = list(dict.fromkeys(out.problems))
    out.flaky = {**_flaky(gold_runs), **_flaky(empty_runs)}
    if out.flaky:
        out.problems.append(f"flaky: {', '.join(sorted(out.flaky))}")
    return out


def validate_tasks(tasks: list[Task], prepare: Callable[[Task], PreparedTask], *, workers: int = 1, repeat: int = 1,
                   factory: SandboxFactory | None = None, deadline_s: float = 900,
                   on_done: Callable[[TaskValidation], None] | None = None) -> list[TaskValidation]:
    factory = factory or default_factory()

    def one(task: Task) -> TaskValidation:
        try:
            prepared = prepare(task)
        except Exception as exc:  # noqa: BLE001  reported as the task's problem
            return TaskValidation(task.instance_id, problems=[f"prepare_failed: {exc}"])
        return validate_task(prepared, repeat=repeat, factory=factory, deadline_s=deadline_s)

    results: dict[str, TaskValidation] = {}
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(one, task) for task in tasks]
        for future in as_completed(futures):
            validation = future.result()
            results[validation.instance_id] = validation
            if on_done:
                on_done(validation)
    return [results[task.instance_id] for task in tasks]

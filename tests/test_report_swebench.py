"""report.json and the run summary against SWE-bench 5.0.2 itself (the installed `swebench`).

Every key SWE-bench writes is ours too, with its meaning: the per-instance keys of
`swebench.harness.grading.get_eval_report`, and the summary of
`swebench.harness.reporting.make_run_report`, which is run here for real on a SWE-bench log
directory laid out from the same outcomes (a report.json where SWE-bench would have written one,
the log lines its failure classification reads) and compared with ours id list by id list.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchgym.harness.predictions import Prediction
from patchgym.harness.report import instance_report, summary
from patchgym.harness.verdict import F2P, P2P, Verdict

swebench_reporting = pytest.importorskip("swebench.harness.reporting")
from swebench.harness.constants import LOG_INSTANCE, LOG_REPORT, LOG_TEST_OUTPUT, RUN_EVALUATION_LOG_DIR  # noqa: E402

MODEL = "org/model"
F2P_IDS, P2P_IDS = ["t.py::test_fix", "t.py::test_fix[1-2]"], ["t.py::test_keep"]
# instance -> (patch, our verdict status, per-test statuses or None when no test ran)
OUTCOMES = {
    "i-resolved": ("diff a", "resolved", ("PASSED", "PASSED", "PASSED")),
    "i-unresolved": ("diff b", "unresolved", ("FAILED", "PASSED", "PASSED")),
    "i-tampered": ("diff c", "tampered", ("PASSED", "PASSED", "PASSED")),
    "i-none": (None, "empty_patch", None),
    "i-empty": ("", "empty_patch", None),
    "i-patch-error": ("not a diff", "patch_error", None),
    "i-infra": ("diff d", "infra_error", None),
    "i-timeout": ("diff e", "timeout", None),
}
SWEBENCH_LOGS = {  # what SWE-bench's own logs would hold for the same outcomes (its classifier reads them)
    "i-infra": (LOG_INSTANCE, "Error response from daemon: container vanished\n"),
    "i-timeout": (LOG_TEST_OUTPUT, "Timeout error: 1800 seconds exceeded.\n"),
}


def _verdict(instance_id: str) -> Verdict:
    _, status, statuses = OUTCOMES[instance_id]
    if statuses is None:
        tests = {F2P: {t: "MISSING" for t in F2P_IDS}, P2P: {t: "MISSING" for t in P2P_IDS}}
    else:
        tests = {F2P: dict(zip(F2P_IDS, statuses[:2])), P2P: dict(zip(P2P_IDS, statuses[2:]))}
    applied = "git apply" if status in ("resolved", "unresolved", "tampered", "timeout") else None
    return Verdict(reward=float(status == "resolved"), status=status, tests=tests, apply_method=applied,
                   instance_id=instance_id, error="sandbox vanished" if status == "infra_error" else None)


def _ours() -> tuple[list[Prediction], dict[str, dict]]:
    predictions = [Prediction(i, MODEL, patch) for i, (patch, _, _) in OUTCOMES.items()]
    reports = {p.instance_id: instance_report(p, _verdict(p.instance_id))[p.instance_id] for p in predictions}
    return predictions, reports


def test_instance_reports_have_swebench_keys_and_meanings() -> None:
    _, reports = _ours()
    swebench_keys = {"patch_is_None", "patch_exists", "patch_successfully_applied", "resolved", "infra_failure"}
    for instance_id, entry in reports.items():
        assert swebench_keys <= set(entry), instance_id
    assert reports["i-none"]["patch_is_None"] and not reports["i-none"]["patch_exists"]
    assert not reports["i-empty"]["patch_is_None"] and reports["i-empty"]["patch_exists"]  # "" is not None
    for instance_id in ("i-none", "i-empty", "i-patch-error", "i-infra", "i-timeout"):
        # No test ran: SWE-bench writes no tests_status (we listed every test as failed before).
        assert "tests_status" not in reports[instance_id], instance_id
        assert not reports[instance_id]["patch_successfully_applied"], instance_id
    assert reports["i-infra"]["infra_failure"] and reports["i-infra"]["infra_failure_reason"] == "sandbox_failed"
    assert not reports["i-timeout"]["infra_failure"]  # ambiguous, not a confirmed environment fault
    ran = reports["i-unresolved"]["tests_status"]
    assert set(ran) == {"FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL"}
    assert ran["FAIL_TO_PASS"] == {"success": ["t.py::test_fix[1-2]"], "failure": ["t.py::test_fix"]}
    assert reports["i-resolved"]["resolved"] and reports["i-resolved"]["patch_successfully_applied"]
    assert reports["i-resolved"]["reward"] == 1.0 and reports["i-resolved"]["status"] == "resolved"  # ours beside


def test_summary_matches_swebench_make_run_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    predictions, reports = _ours()
    ours = summary(MODEL, list(OUTCOMES), predictions, reports)

    monkeypatch.chdir(tmp_path)  # make_run_report reads logs/run_evaluation/<run>/<model>/<id>/ under the cwd
    run_id = "r1"
    for prediction in predictions:
        status = OUTCOMES[prediction.instance_id][1]
        folder = Path(RUN_EVALUATION_LOG_DIR) / run_id / MODEL.replace("/", "__") / prediction.instance_id
        folder.mkdir(parents=True)
        if status in ("resolved", "unresolved", "tampered", "timeout"):  # SWE-bench wrote a report for these
            entry = {"resolved": status == "resolved"}
            (folder / LOG_REPORT).write_text(json.dumps({prediction.instance_id: entry}))
        if prediction.instance_id in SWEBENCH_LOGS:
            name, text = SWEBENCH_LOGS[prediction.instance_id]
            (folder / name).write_text(text)
    rows = {p.instance_id: {"instance_id": p.instance_id, "model_name_or_path": MODEL, "model_patch": p.patch}
            for p in predictions}
    dataset = [{"instance_id": i} for i in OUTCOMES]
    written = swebench_reporting.make_run_report(rows, dataset, run_id)
    theirs = json.loads(Path(written).read_text())

    missing = set(theirs) - set(ours)
    assert not missing, f"SWE-bench keys missing from our summary: {sorted(missing)}"
    for key, value in theirs.items():
        if key == "failure_reasons":  # reasons: theirs from log signatures, ours from the verdict
            assert set(ours[key]) == set(value), (ours[key], value)
            assert ours[key]["i-timeout"] == value["i-timeout"] == "tests_timed_out"
            continue
        assert ours[key] == value, (key, ours[key], value)
    assert ours["model_name_or_path"] == MODEL  # ours beside theirs

"""Reports of offline grading in SWE-bench's shapes, plus patchgym's fields.

`instance_report(prediction, verdict)` is one prediction's report.json:
`{instance_id: {patch_is_None, patch_exists, patch_successfully_applied, resolved, tests_status, ...}}`
with SWE-bench's keys (and `tests_status` as `{FAIL_TO_PASS|PASS_TO_PASS|FAIL_TO_FAIL|PASS_TO_FAIL:
{success: [...], failure: [...]}}`), plus ours: reward, status, flags, apply_method, durations,
error, the per-test statuses, model_name_or_path and the patch's sha256.

`summary(...)` is SWE-bench's run report for one model: total, submitted, completed, resolved,
unresolved, empty_patch and error counts with their id lists. As in SWE-bench, an empty prediction
is counted as `empty_patch` (not completed), a patch that cannot be applied or an infrastructure
failure as `error`, and a timeout as completed but unresolved.
"""

from __future__ import annotations

from typing import Any, Iterable

from patchgym.harness.predictions import Prediction
from patchgym.harness.verdict import F2P, P2P, Verdict, f2p_passes, p2p_passes

COMPLETED = {"resolved", "unresolved", "tampered", "timeout"}
ERRORS = {"patch_error", "infra_error"}


def instance_report(prediction: Prediction, verdict: Verdict) -> dict[str, Any]:
    tests_status = {
        F2P: {"success": [t for t, s in verdict.tests.get(F2P, {}).items() if f2p_passes(s)],
              "failure": [t for t, s in verdict.tests.get(F2P, {}).items() if not f2p_passes(s)]},
        P2P: {"success": [t for t, s in verdict.tests.get(P2P, {}).items() if p2p_passes(s)],
              "failure": [t for t, s in verdict.tests.get(P2P, {}).items() if not p2p_passes(s)]},
        "FAIL_TO_FAIL": {"success": [], "failure": []},
        "PASS_TO_FAIL": {"success": [], "failure": []},
    }
    applied = verdict.apply_method is not None and verdict.status in COMPLETED
    entry: dict[str, Any] = {
        "patch_is_None": prediction.patch is None,
        "patch_exists": bool(prediction.patch and prediction.patch.strip()),
        "patch_successfully_applied": applied,
        "resolved": verdict.status == "resolved",
        "tests_status": tests_status,
        "reward": verdict.reward,
        "status": verdict.status,
        "flags": verdict.flags,
        "apply_method": verdict.apply_method,
        "durations": verdict.durations,
        "error": verdict.error,
        "tests": verdict.tests,
        "model_name_or_path": prediction.model,
        "patch_sha256": prediction.patch_sha256,
    }
    return {prediction.instance_id: entry}


def summary(model: str, task_ids: Iterable[str], predictions: Iterable[Prediction],
            reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """SWE-bench's run report for one model. `reports` maps instance id -> that instance's entry."""
    task_ids = list(task_ids)
    submitted = sorted({p.instance_id for p in predictions if p.model == model})
    ids: dict[str, list[str]] = {k: [] for k in ("completed", "resolved", "unresolved", "empty_patch", "error", "infra_failure")}
    for instance_id in submitted:
        entry = reports.get(instance_id)
        status = entry.get("status") if entry else None
        if status == "empty_patch":
            ids["empty_patch"].append(instance_id)
        elif status in COMPLETED:
            ids["completed"].append(instance_id)
            ids["resolved" if status == "resolved" else "unresolved"].append(instance_id)
        else:
            ids["error"].append(instance_id)
            if status == "infra_error":
                ids["infra_failure"].append(instance_id)
    incomplete = sorted(set(task_ids) - set(submitted))
    return {
        "model_name_or_path": model,
        "total_instances": len(task_ids),
        "submitted_instances": len(submitted),
        "completed_instances": len(ids["completed"]),
        "resolved_instances": len(ids["resolved"]),
        "unresolved_instances": len(ids["unresolved"]),
        "empty_patch_instances": len(ids["empty_patch"]),
        "error_instances": len(ids["error"]),
        "infra_failure_instances": len(ids["infra_failure"]),
        "completed_ids": ids["completed"],
        "incomplete_ids": incomplete,
        "empty_patch_ids": ids["empty_patch"],
        "submitted_ids": submitted,
        "resolved_ids": ids["resolved"],
        "unresolved_ids": ids["unresolved"],
        "error_ids": ids["error"],
        "infra_failure_ids": ids["infra_failure"],
        "schema_version": 2,
    }

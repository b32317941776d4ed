"""Reports of offline grading in SWE-bench 5.0.2's shapes, plus patchgym's fields beside them.

`instance_report(prediction, verdict)` is one prediction's report.json, with SWE-bench's keys and
meanings (swebench.harness.grading.get_eval_report):
`{instance_id: {patch_is_None, patch_exists, patch_successfully_applied, resolved, infra_failure,
[infra_failure_reason], [tests_status]}}` where `patch_exists` means the prediction's patch is not
None, `patch_successfully_applied` that it applied *and* the tests' results were read, and
`tests_status` (`{FAIL_TO_PASS|PASS_TO_PASS|FAIL_TO_FAIL|PASS_TO_FAIL: {success, failure}}`) is
present only when tests ran: an empty or null prediction, a patch that does not apply, a run that
timed out or a sandbox failure has none (it used to list every test as failed though none ran).
Ours beside them: reward, status, flags, apply_method, durations, error, the per-test statuses
(`tests`), model_name_or_path and the patch's sha256.

`summary(...)` is SWE-bench's run report for one model (swebench.harness.reporting.make_run_report):
total, submitted, completed, resolved, unresolved, infra_failure, ambiguous_failure, empty_patch
and error counts with their id lists, and `failure_reasons` (id -> reason) for the unresolved and
errored instances that are classified. As in SWE-bench, an empty prediction is counted as
`empty_patch` (not completed), a patch that cannot be applied or an infrastructure failure as
`error`, a timeout as completed but unresolved; the failure classes are advisory (those ids stay
in unresolved_ids / error_ids). Our classification, from the verdict instead of log signatures: a
sandbox failure (`infra_error`) is an infrastructure failure, reason `sandbox_failed`; a timeout
is ambiguous (a broken environment or a patch that hangs), reason `tests_timed_out` (SWE-bench's
name for it). Ours beside them: model_name_or_path.
"""

from __future__ import annotations

from typing import Any, Iterable

from patchgym.harness.predictions import Prediction
from patchgym.harness.verdict import F2P, P2P, Verdict, f2p_passes, p2p_passes

COMPLETED = {"resolved", "unresolved", "tampered", "timeout"}
ERRORS = {"patch_error", "infra_error"}
TESTS_READ = {"resolved", "unresolved", "tampered"}  # the patch applied and the tests' results were read
# status -> (SWE-bench's failure reason, its tier: "environment" or "ambiguous")
FAILURE_CLASSES = {"infra_error": ("sandbox_failed", "environment"), "timeout": ("tests_timed_out", "ambiguous")}


def instance_report(prediction: Prediction, verdict: Verdict) -> dict[str, Any]:
    tests_read = verdict.apply_method is not None and verdict.status in TESTS_READ
    entry: dict[str, Any] = {
        "patch_is_None": prediction.patch is None,
        "patch_exists": prediction.patch is not None,
        "patch_successfully_applied": tests_read,
        "resolved": verdict.status == "resolved",
        "infra_failure": FAILURE_CLASSES.get(verdict.status, ("", ""))[1] == "environment",
    }
    if entry["infra_failure"]:
        entry["infra_failure_reason"] = FAILURE_CLASSES[verdict.status][0]
    if tests_read:
        entry["tests_status"] = {
            F2P: {"success": [t for t, s in verdict.tests.get(F2P, {}).items() if f2p_passes(s)],
                  "failure": [t for t, s in verdict.tests.get(F2P, {}).items() if not f2p_passes(s)]},
            P2P: {"success": [t for t, s in verdict.tests.get(P2P, {}).items() if p2p_passes(s)],
                  "failure": [t for t, s in verdict.tests.get(P2P, {}).items() if not p2p_passes(s)]},
            "FAIL_TO_FAIL": {"success": [], "failure": []},
            "PASS_TO_FAIL": {"success": [], "failure": []},
        }
    entry.update({
        "reward": verdict.reward,
        "status": verdict.status,
        "flags": verdict.flags,
        "apply_method": verdict.apply_method,
        "durations": verdict.durations,
        "error": verdict.error,
        "tests": verdict.tests,
        "model_name_or_path": prediction.model,
        "patch_sha256": prediction.patch_sha256,
    })
    return {prediction.instance_id: entry}


def summary(model: str, task_ids: Iterable[str], predictions: Iterable[Prediction],
            reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """SWE-bench's run report for one model. `reports` maps instance id -> that instance's entry."""
    task_ids = list(task_ids)
    submitted = sorted({p.instance_id for p in predictions if p.model == model})
    ids: dict[str, list[str]] = {k: [] for k in ("completed", "resolved", "unresolved", "empty_patch", "error",
                                                  "infra_failure", "ambiguous_failure")}
    reasons: dict[str, str] = {}
    for instance_id in submitted:
        entry = reports.get(instance_id)
        status = entry.get("status") if entry else None
        if status == "empty_patch":
            ids["empty_patch"].append(instance_id)
            continue
        if status in COMPLETED:
            ids["completed"].append(instance_id)
            ids["resolved" if status == "resolved" else "unresolved"].append(instance_id)
        else:
            ids["error"].append(instance_id)
        if status in FAILURE_CLASSES:  # advisory: the id stays in unresolved_ids / error_ids
            reason, tier = FAILURE_CLASSES[status]
            reasons[instance_id] = reason
            ids["infra_failure" if tier == "environment" else "ambiguous_failure"].append(instance_id)
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
        "ambiguous_failure_instances": len(ids["ambiguous_failure"]),
        "completed_ids": ids["completed"],
        "incomplete_ids": incomplete,
        "empty_patch_ids": ids["empty_patch"],
        "submitted_ids": submitted,
        "resolved_ids": ids["resolved"],
        "unresolved_ids": ids["unresolved"],
        "infra_failure_ids": ids["infra_failure"],
        "ambiguous_failure_ids": ids["ambiguous_failure"],
        "failure_reasons": dict(sorted(reasons.items())),
        "error_ids": ids["error"],
        "schema_version": 2,
    }

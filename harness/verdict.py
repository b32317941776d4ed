"""The verdict of grading one patch, and the rules that decide it (SWE-bench's).

A task is resolved only if every FAIL_TO_PASS and every PASS_TO_PASS test passes:
- PASSED and XFAIL pass (and a non-strict XPASS, which pytest itself counts as a success);
- a SKIPPED FAIL_TO_PASS test fails; a SKIPPED PASS_TO_PASS test is kept (not a regression), as in
  SWE-bench. (A skip raised from a file the patch changed is reported as FAILED by the grader's
  pytest plugin, so a patch cannot turn tests into skips.)
- a test that did not run or is missing from the results fails (`MISSING`).

Expected ids that SWE-bench data holds truncated in the middle of a parameter
(`test_x[log(photon`, more `[` than `]`) match the observed ids they prefix, when all those agree on
pass or fail: SWE-bench matches them the same way.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from patchgym.harness.parsers import PASSING, TestStatus

# `tampered`: the run was not trusted because the reporter saw tampering (integrity findings, the
# audit hook's refusals, a canary that did not fail); reward 0 like `unresolved`.
Status = Literal["resolved", "unresolved", "tampered", "empty_patch", "patch_error", "timeout", "infra_error"]
MISSING = "MISSING"
F2P, P2P = "FAIL_TO_PASS", "PASS_TO_PASS"


class Verdict(BaseModel):
    reward: float = 0.0
    status: Status
    tests: dict[str, dict[str, str]] = Field(default_factory=lambda: {F2P: {}, P2P: {}})
    flags: list[str] = Field(default_factory=list)
    apply_method: str | None = None
    durations: dict[str, float] = Field(default_factory=dict)
    log_dir: str | None = None
    error: str | None = None
    instance_id: str | None = None

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"

    def failing_tests(self) -> list[str]:
        """The graded tests that did not pass (by the rules above)."""
        return [t for t, s in self.tests.get(F2P, {}).items() if not f2p_passes(s)] + [
            t for t, s in self.tests.get(P2P, {}).items() if not p2p_passes(s)
        ]

    def tests_pass(self) -> bool:
        """Every graded test passed (whatever the status says: used to check an empty patch fails)."""
        return bool(self.tests.get(F2P)) and not self.failing_tests()


def f2p_passes(status: str) -> bool:
    return status in PASSING


def p2p_passes(status: str) -> bool:
    return status in PASSING or status == TestStatus.SKIPPED.value


def lookup(test_id: str, observed: dict[str, str]) -> str:
    """The observed status of an expected id (exact, or SWE-bench's truncated-id prefix match)."""
    if test_id in observed:
        return observed[test_id]
    if test_id.count("[") > test_id.count("]"):
        candidates = [status for seen, status in observed.items() if seen.startswith(test_id)]
        if candidates and len({status in PASSING for status in candidates}) == 1:
            return candidates[0]
    return MISSING


def graded_statuses(fail_to_pass: list[str], pass_to_pass: list[str], observed: dict[str, str]) -> dict[str, dict[str, str]]:
    return {F2P: {t: lookup(t, observed) for t in fail_to_pass}, P2P: {t: lookup(t, observed) for t in pass_to_pass}}


def all_pass(tests: dict[str, dict[str, str]]) -> bool:
    return all(f2p_passes(s) for s in tests[F2P].values()) and all(p2p_passes(s) for s in tests[P2P].values())

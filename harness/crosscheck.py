"""Deciding a test run's outcome from three witnesses: the signed stream, the log, the exit code.

For pytest tasks, and unittest tasks run by the signed unittest runner, the signed stream
(patchgym.harness.results) is the source of the statuses. It
must verify (signed, complete, `start` to `end`) and report no tampering. The log parser's reading
of the same run and the process exit code must agree with it:
- a graded test the log shows passing but the stream does not (or the reverse) is a disagreement;
  so is a graded test the stream reports passing and the log does not show at all, for the
  grader's own command (pytest with a PASSED line per test, the signed unittest runner at verbosity 2: both list
  every test) when the log was not cut. Why: code that points every pipe of the process at
  /dev/null leaves an empty log, and a log with nothing in it disagreed with nothing (red team
  round 4: that plus a rewritten stream got reward 1). Under a custom `test_cmd`, or a cut log,
  an absent test is no disagreement;
- for a direct pytest command, the process must not exit 0 when pytest's own exit status was not 0
  (code that forges a clean exit after a failed session).
Any problem or disagreement makes the run not resolved and is named in the flags
(`result_stream:`, `tamper:`, `log_disagrees:`, `exit_code_mismatch`).

For a custom command with another parser (Django's runner, ...) the log is the only witness; a failing exit code with every
graded test passing in the log is flagged (`exit_code_mismatch`) and not resolved.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from patchgym.harness.parsers import PASSING, get_parser
from patchgym.harness.results import read_stream
from patchgym.harness.runner import GradingRun, is_direct_runner
from patchgym.harness.verdict import F2P, MISSING, P2P, all_pass, lookup, graded_statuses
from patchgym.tasks.model import Task

# A contradiction copy that passed because its changed expectation held against an honest matcher
# of the repository's (the equality probe's `matched_honestly`): its pass tells nothing.
MATCHED = "MATCHED"

DISQUALIFYING = ("result_stream:", "tamper:", "log_disagrees:", "exit_code_mismatch", "canary_not_run:")
FORK_REFUSED = -2  # a `first_call_passed` record's number where no fork could be made (first_calls.REFUSED)
ORIGINAL_FAILED_IN_ITS_FORK = -3  # the original's own assertion failed in a fork of its state (first_calls.ORIGINAL_FAILED)
ORIGINAL_HELD_IN_ITS_FORK = -5  # the original alone in a fork of its state gave no answer in time (first_calls.ORIGINAL_HELD)
DOCTEST_COPY_PASSED = -4  # a graded doctest with every expected output changed passed in a fork (first_calls.DOCTEST_COPY_PASSED)


@dataclass
class Outcome:
    tests: dict[str, dict[str, str]]
    flags: list[str] = field(default_factory=list)
    log_statuses: dict[str, str] = field(default_factory=dict)

    @property
    def disqualified(self) -> bool:
        return any(flag.startswith(DISQUALIFYING) for flag in self.flags)

    @property
    def resolved(self) -> bool:
        return all_pass(self.tests) and not self.disqualified

    @property
    def tampered(self) -> bool:
        """The reporter saw tampering (an integrity finding, a canary that did not fail)."""
        return any(flag.startswith("tamper:") for flag in self.flags)


def canary_flags(stream, only_collected: bool = False) -> list[str]:
    """Every planted canary must fail. One that passed, xfailed, was skipped or never reported is
    tampering -- unless its module failed to collect (then the graded tests there did not run either).
    A contradiction canary (a graded test copied with another expected value) is judged only when
    its original passed: the two passing together means the result agreed with two different
    expectations. `only_collected` (a task's own pytest command, which may select tests by id or
    `-k`): a canary the session did not collect is left out, with a note; which ones it collected
    the reporter says at the end of collection, when nothing can tell a canary from a graded test
    (a patch that kept every canary from being collected would keep the graded tests out too)."""
    if not stream.canary_count or not stream.ended:
        return []
    flags = []
    twins = set(stream.twins.values())
    left_out = []
    for number in range(stream.canary_count):
        if number in twins:
            continue  # an unchanged copy of a graded test: it may pass or fail
        if only_collected and _not_collected(stream, number):
            left_out.append(number)
            continue
        if number in stream.by_param:
            flags += _instance_flags(number, stream)
            continue
        status = stream.canaries.get(number)
        if status is None and number in stream.canary_params:
            # A canary made parametrised by what its class or conftest gives every test there (an
            # autouse fixture with `params`, `pytest_generate_tests`): every instance must fail
            # (requests' gold was `canary N MISSING`, a false-positive hunt).
            instances = stream.canary_params[number]
            failed = any(s in ("FAILED", "ERROR") for s in instances.values())
            standing = [s for param, s in sorted(instances.items()) if s not in ("FAILED", "ERROR")
                        and not (failed and s == "SKIPPED" and _skipped_for_every_test(stream, param))]
            status = standing[0] if standing else "FAILED"
        if status in ("FAILED", "ERROR"):
            continue
        original = stream.contradicts.get(number)
        if original is not None and status == MATCHED:
            # its changed expectation held against an honest matcher of the repository's, which takes
            # the changed value too (patchgym_equality_probe.matched_honestly, fpV Y1)
            flags.append(f"note: canary {number}, {original} with another expected value, met a matcher that takes it too")
            continue
        if original is not None:
            if lookup(original, stream.tests) in PASSING and _twin_passed(stream, number):
                flags.append(f"tamper: contradiction_passed: canary {number}, {original} with another expected value, "
                             f"{status or MISSING} while the test itself passed")
            continue
        if status is None and stream.collect_errors:
            flags.append(f"canary_not_run: canary {number} (collection errors)")
            continue
        if status == "SKIPPED" and _skipped_with_every_test_beside_it(stream, number):
            flags.append(f"note: canary {number} skipped with every test beside it")
            continue
        flags.append(f"tamper: canary_did_not_fail: canary {number} {status or MISSING}")
    if left_out:
        flags.append(f"note: {len(left_out)} of {stream.canary_count} canaries not collected by the task's test_cmd")
    for number, original in stream.first_call_passes:
        # a changed expectation met on the state the original found (patchgym_first_calls)
        if lookup(original, stream.tests) not in PASSING:
            continue
        if number == DOCTEST_COPY_PASSED:
            flags.append(f"tamper: contradiction_passed_on_a_first_call: {original} with every expected output changed, "
                         "passed in a fork of its state")
        elif number == ORIGINAL_FAILED_IN_ITS_FORK:
            flags.append(f"tamper: passed_only_outside_a_fork: {original}: its own assertion failed, or an error came "
                         "through the patch's code, on the same state in a fork, where the run's passed")
        elif number == ORIGINAL_HELD_IN_ITS_FORK:
            flags.append(f"tamper: passed_only_outside_a_fork: {original}: called alone on the same state in a fork, it "
                         "gave no answer in the time the run's own call took, and more, where the run's passed")
        elif number == FORK_REFUSED:
            flags.append(f"tamper: first_call_fork_refused: {original}: no fork of its state could be made")
        elif number < 0:
            flags.append(f"tamper: first_call_fork_silenced: {original}: the fork of its state was stopped or left "
                         "without answering")
        else:
            flags.append(f"tamper: contradiction_passed_on_a_first_call: canary {number}, {original} with another "
                         "expected value, passed where its call was the first")
    return flags


def _not_collected(stream, number: int) -> bool:
    """A canary the session neither collected nor reported (when the reporter said what it collected)."""
    if number in stream.canaries or number in stream.canary_params:
        return False  # reported: judged like any other
    # no record (xdist's controller collects nothing itself): the reported ones are judged
    return stream.canaries_collected is None or number not in stream.canaries_collected


def _container(test_id: str) -> str:
    """The module or class of a test id: `tests/test_x.py::C` of `tests/test_x.py::C::test_m[p]`,
    `tests.test_x.C` of the unittest id `tests.test_x.C.test_m`."""
    if "::" in test_id:
        return test_id.split("[", 1)[0].rsplit("::", 1)[0]
    return test_id.rsplit(".", 1)[0]


def _skipped_for_every_test(stream, param: str) -> bool:
    """Whether every graded test run with the parameter `param` (`...[param]`) was skipped, and one
    was at least: an autouse fixture of the conftest's, parametrised over implementations, skips
    the one not built for every test (markupsafe's `_speedups` without its C extension: each gold
    `canary N SKIPPED`, a false-positive hunt). The canary's other instances failed there."""
    suffix = "[" + param + "]"
    statuses = [status for test_id, status in stream.tests.items() if test_id.endswith(suffix)]
    return bool(statuses) and all(status == "SKIPPED" for status in statuses)


def _skipped_with_every_test_beside_it(stream, number: int) -> bool:
    """A canary the reporter saw skipped by no code of the patch's (it says which module or class
    it ran in only then), in a module or class where every test reported was skipped too: a
    `setUp` under `@skipUnless(isatty())`, a `setup_class` calling `pytest.importorskip`, a
    conftest skipping `slow` classes, a skip inherited from a base class. The canary says nothing
    there (colorama's and networkx's gold were `tampered`, a false-positive hunt: their skipped
    tests were graded PASS_TO_PASS, which a skip does not fail). Not covered by canaries then: a
    patch that gets such a whole class skipped by a skip its source declares, to hide a regression
    of a PASS_TO_PASS test there (a FAIL_TO_PASS test skipped fails)."""
    within = stream.canary_within.get(number)
    beside = [status for test_id, status in stream.tests.items() if within and _container(test_id) == within]
    return bool(beside) and all(status == "SKIPPED" for status in beside)


def _twin_passed(stream, number: int, param: str | None = None) -> bool:
    """Whether a contradiction that passed is to be judged: its twin (the graded test copied
    unchanged, run right before it) passed, so the test is repeatable and the copy with another
    expectation bound to fail; or the copy's expectation is a changed value (`exact`), which no
    honest rerun produces whatever its twin did (see contradictions.plan). A reporter that planted
    no twin: judged as before twins existed. A twin that passed only on another attempt (flaky's
    reruns, pytest-rerunfailures') shows no repeatable test: flaky's own `test_something_flaky`
    fails its first run and passes its second by a mutable default, and its negated copy, with a
    fresh default, passed its first (fpP: the gold `tampered`)."""
    twin = stream.twins.get(number)
    if twin is None or number in stream.exact:
        return True
    status = stream.canaries.get(twin) if param is None else stream.canary_params.get(twin, {}).get(param)
    return status == "PASSED" and (twin, param) not in stream.canaries_retried


def _instance_flags(number: int, stream) -> list[str]:
    """A contradiction of a parametrised test: each instance of the copy (`<copy>[p]`) against the
    original's instance with the same parameters (`test_x[p]`). A copy none of whose instances was
    reported, while instances of the original passed and nothing failed to collect, was removed."""
    base = stream.contradicts.get(number, "")
    instances = stream.canary_params.get(number, {})
    flags = []
    for param, status in sorted(instances.items()):
        if status in ("FAILED", "ERROR", MATCHED):
            continue
        original = f"{base}[{param}]"
        if lookup(original, stream.tests) in PASSING and _twin_passed(stream, number, param):
            flags.append(f"tamper: contradiction_passed: canary {number}[{param}], {original} with another expected value, "
                         f"{status} while the test itself passed")
    twin = stream.twins.get(number)
    twin_ran = twin is None or "PASSED" in stream.canary_params.get(twin, {}).values()
    if not instances and stream.canaries.get(number) is None and not stream.collect_errors and twin_ran:
        passed = sorted(t for t, s in stream.tests.items() if t.startswith(base + "[") and s in PASSING)
        if passed:
            flags.append(f"tamper: contradiction_passed: canary {number}, copying {base}, never reported while {passed[0]} passed")
    return flags


def decide(task: Task, run: GradingRun) -> Outcome:
    log = run.log
    log_statuses = get_parser(task.log_parser)(log)
    flags: list[str] = []
    if run.result.extra.get("oom_killed"):
        flags.append("oom_killed")
    if run.result.extra.get("pids_limited"):
        flags.append("process_limit_hit")

    if run.channel is None:
        tests = graded_statuses(task.FAIL_TO_PASS, task.PASS_TO_PASS, log_statuses)
        if all_pass(tests) and run.result.exit_code != 0:
            flags.append("exit_code_mismatch")
        return Outcome(tests, flags, log_statuses)

    stream = read_stream(run.channel, run.stream)
    tests = graded_statuses(task.FAIL_TO_PASS, task.PASS_TO_PASS, stream.tests)
    flags += [f"result_stream: {problem}" for problem in stream.problems]
    flags += [f"tamper: {what}" for what in stream.integrity]
    flags += canary_flags(stream, only_collected=bool(task.test_cmd))
    for test_id, note in stream.notes.items():
        flags.append(f"note: {test_id}: {note}")

    # The grader's own command lists every test it ran; a cut log or a custom command may not.
    complete_log = (not task.test_cmd and stream.ended and run.result.truncated_bytes == 0
                    and is_direct_runner(run.command))
    for group in (F2P, P2P):
        for test_id, status in tests[group].items():
            in_log = lookup(test_id, log_statuses)
            if in_log == MISSING:
                if complete_log and status in PASSING:
                    flags.append(f"log_disagrees: {test_id}: not in the log, stream {status}")
                continue
            if (in_log in PASSING) != (status in PASSING):
                flags.append(f"log_disagrees: {test_id}: log {in_log}, stream {status}")
    if stream.ended and is_direct_runner(run.command) and run.result.exit_code == 0 and stream.exitstatus != 0:
        # Only the direction that claims more than pytest saw: a crash at interpreter shutdown after a
        # clean session (exit != 0, pytest 0) gains nothing and is not held against the patch.
        flags.append(f"exit_code_mismatch: pytest reported {stream.exitstatus}, the process exited 0")
    return Outcome(tests, flags, log_statuses)

"""The `pytest` log parser: reads the short test summary (`-rA`, or the grader's `-rfEsxXp`) and `-v` progress lines.

Summary lines are `STATUS node_id` (for FAILED and ERROR: `STATUS node_id - message`; a PASSED line
never has a message, so its id is the rest of the line, unbalanced brackets and all). Node ids may
hold spaces, brackets, ` - ` and escaped unicode inside their parameter part, so the id is not cut
at the first space: for a parametrized id (a `[` right after the test's name) it runs to the first
`]` followed by ` - ` at which its brackets balance, or the end of the line; any other id ends at
the first ` - `, whatever brackets the message holds. pytest's aggregated `SKIPPED [N] file:line: reason` lines name no test and are ignored.
A `SUBFAILED(...) node_id` line (pytest >= 9, a failing subtest) fails its test, which pytest may
still list as PASSED.
Verbose lines (`node_id STATUS [ 42%]`) are read too, for runs with `-v` and no summary.

When one id has several statuses (a test that passed but whose teardown errored), the failing one
wins: the test did not pass cleanly. Colour escapes are stripped first.
"""

from __future__ import annotations

import re

from patchgym.harness.parsers.registry import PASSING, TestStatus, register_parser

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_STATUSES = tuple(status.value for status in TestStatus)
_SUMMARY = re.compile(r"^(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) (.+)$")
_VERBOSE = re.compile(r"^(\S.*?::.*?) (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)(?: +\[ *\d+%\])?$")
_SKIP_AGGREGATE = re.compile(r"^\[\d+\] ")
# pytest >= 9 reports failing subtests on lines of their own (`SUBFAILED(n=1) t.py::T::test_x - msg`)
# while a unittest test whose subtests failed still gets `PASSED t.py::T::test_x`: the test failed.
_SUBFAILED = re.compile(r"^SUBFAILED\(.*?\) (\S[^ ]*::.+)$")


def split_summary_rest(status: str, rest: str) -> str | None:
    """The node id out of what follows the status word on a summary line (None if it names no test).

    The id is parametrized only when a `[` follows the test's name directly (`::test_x[`); then it
    runs to the first `]` followed by ` - ` (or the end) at which its brackets balance. Otherwise it
    ends at the first ` - `: a message holding `[`, `]` or ` - ` (`assert [1] == [2]`) is not
    folded into the id.
    """
    rest = rest.rstrip()
    if status == TestStatus.SKIPPED.value and _SKIP_AGGREGATE.match(rest):
        return None
    if status == TestStatus.PASSED.value:  # pytest prints no message after a passed test's id
        return rest or None
    if " - " not in rest:
        return rest or None
    first_dash = rest.find(" - ")
    bracket = rest.find("[")
    name = rest[:bracket].rsplit("::", 1)[-1] if bracket != -1 else ""
    if bracket == -1 or first_dash < bracket or "::" not in rest[:bracket] or not name.isidentifier():
        return rest[:first_dash]
    cuts = []
    start = bracket
    while (cut := rest.find(" - ", start)) != -1:
        if rest[:cut].endswith("]"):
            cuts.append(cut)
        start = cut + 1
    for cut in cuts:
        head = rest[:cut]
        if head.count("[") == head.count("]"):
            return head
    if cuts:
        return rest[: cuts[0]]
    return rest


def _worse(old: str | None, new: str) -> str:
    if old is None:
        return new
    if old in PASSING and new not in PASSING:
        return new
    if new in PASSING and old not in PASSING:
        return old
    return new


@register_parser("pytest")
def parse_pytest_log(log: str) -> dict[str, str]:
    results: dict[str, str] = {}
    for raw in log.splitlines():
        line = _ANSI.sub("", raw).rstrip("\r")
        match = _SUMMARY.match(line)
        if match:
            test_id = split_summary_rest(match.group(1), match.group(2))
            if test_id:
                results[test_id] = _worse(results.get(test_id), match.group(1))
            continue
        match = _SUBFAILED.match(line)
        if match:
            test_id = split_summary_rest(TestStatus.FAILED.value, match.group(1))
            if test_id:
                results[test_id] = _worse(results.get(test_id), TestStatus.FAILED.value)
            continue
        match = _VERBOSE.match(line.rstrip())
        if match and not line.startswith(_STATUSES):
            test_id = match.group(1).strip()
            results[test_id] = _worse(results.get(test_id), match.group(2))
    return results

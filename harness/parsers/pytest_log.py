"""The `pytest` log parser: reads the `-rA` short test summary and `-v` progress lines.

Summary lines are `STATUS node_id` (for FAILED and ERROR: `STATUS node_id - message`). Node ids may
hold spaces, brackets, ` - ` and escaped unicode inside their parameter part, so the id is not cut
at the first space: for a parametrized id it runs to the first `]` followed by ` - ` or the end of
the line. pytest's aggregated `SKIPPED [N] file:line: reason` lines name no test and are ignored.
Verbose lines (`node_id STATUS [ 42%]`) are read too, for runs with `-v` and no summary.

When one id has several statuses (a test that passed but whose teardown errored), the failing one
wins: the test did not pass cleanly. Colour escapes are stripped first.
"""

from __future__ import annotations

import re

from patchgym.harness.parsers import PASSING, TestStatus, register_parser

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_STATUSES = tuple(status.value for status in TestStatus)
_SUMMARY = re.compile(r"^(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) (.+)$")
_VERBOSE = re.compile(r"^(\S.*?::.*?) (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)(?: +\[ *\d+%\])?$")
_SKIP_AGGREGATE = re.compile(r"^\[\d+\] ")


def split_summary_rest(status: str, rest: str) -> str | None:
    """The node id out of what follows the status word on a summary line (None if it names no test)."""
    rest = rest.rstrip()
    if status == TestStatus.SKIPPED.value and _SKIP_AGGREGATE.match(rest):
        return None
    if " - " not in rest:
        return rest or None
    head = rest.split("::", 1)
    if len(head) == 2 and "[" in head[1]:
        # Parametrized: the id ends with "]"; take the first " - " that follows a "]".
        start = 0
        while (cut := rest.find(" - ", start)) != -1:
            if rest[:cut].endswith("]"):
                return rest[:cut]
            start = cut + 1
        return rest
    return rest.split(" - ", 1)[0]


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
        match = _VERBOSE.match(line.rstrip())
        if match and not line.startswith(_STATUSES):
            test_id = match.group(1).strip()
            results[test_id] = _worse(results.get(test_id), match.group(2))
    return results

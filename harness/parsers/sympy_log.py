"""The `sympy` log parser: reads the output of sympy's own runner, `bin/test --verbose`.

SWE-bench grades sympy's rows with that command (`bin/test -C --verbose <files>`), and names their
tests by the bare function name (`test_rotate`). The verbose runner prints each file as
`path/test_x.py[N] `, then each test on a line of its own, its name and one result mark:

    sympy/utilities/tests/test_iterables.py[45]
    test_rotate ok
    test_partitions F
    test_bell_perm Slow w
    test_issue_21 f                                                        [FAIL]

`ok` passed; `F` failed; `E` raised; `T` timed out; `f` failed as marked (XFAIL); `X` passed though
marked to fail (XPASS); `s`, `w` (slow), `K` skipped, after the skip's reason or ` - `. The last
test of a file carries the file's `[OK]`/`[FAIL]`, and a test's own output can land between its
name and its mark. The report after the run heads each failure and error with
`____ path/test_x.py:test_name ____`: such a test is FAILED whatever its line said (or where
its line was lost). A name in two files keeps the worse result: a failure beats a pass.

The log is this command's only witness: sympy's runner runs no reporter of the grader's, so a
patch that prints such lines is believed (the limit of every custom command, docs/grading.md).
"""

from __future__ import annotations

import re

from patchgym.harness.parsers.registry import PASSING, TestStatus, register_parser

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_FILE_MARK = re.compile(r"\s*\[(?:OK|FAIL)\]\s*$")
_LINE = re.compile(r"^(?P<name>test_\w+) (?:.* )?(?P<mark>ok|F|E|T|f|X|s|w|K)$")
_HEADER = re.compile(r"^_+ (?P<file>\S+\.py):(?P<name>test_\w+) _+$")
_MARKS = {
    "ok": TestStatus.PASSED.value,
    "F": TestStatus.FAILED.value,
    "E": TestStatus.ERROR.value,
    "T": TestStatus.FAILED.value,
    "f": TestStatus.XFAIL.value,
    "X": TestStatus.XPASS.value,
    "s": TestStatus.SKIPPED.value,
    "w": TestStatus.SKIPPED.value,
    "K": TestStatus.SKIPPED.value,
}


def _record(results: dict[str, str], name: str, status: str) -> None:
    """Keep the worse of two results for one name (a pass never hides a failure)."""
    if name in results and results[name] not in PASSING and status in PASSING:
        return
    results[name] = status


@register_parser("sympy")
def parse_sympy_log(log: str) -> dict[str, str]:
    results: dict[str, str] = {}
    for raw in _ANSI.sub("", log).splitlines():
        line = _FILE_MARK.sub("", raw.rstrip())
        header = _HEADER.match(line)
        if header:
            # (an error's header names the file alone where the module failed to import)
            status = TestStatus.ERROR.value if results.get(header["name"]) == TestStatus.ERROR.value else TestStatus.FAILED.value
            _record(results, header["name"], status)
            continue
        found = _LINE.match(line)
        if found:
            _record(results, found["name"], _MARKS[found["mark"]])
    return results

"""The `unittest` log parser: reads `python -m unittest -v` (and Django-style) output.

Ids are `module.Class.test_method`, whichever way the runner prints them: Python >= 3.11 prints
`test_m (module.Class.test_m) ... ok`, older versions `test_m (module.Class) ... ok`. Results come
from the verbose lines (`ok`, `FAIL`, `ERROR`, `skipped ...`, `expected failure`, `unexpected
success`), including a result word that lands on a later line because the test printed something
or has a docstring, and from the `FAIL: ...` / `ERROR: ...` headers of the failure report (which
also catch failing subtests of a test whose line said `ok`). A failure beats a pass for one id.
Each result is also recorded under SWE-bench's Django-style id, `test_m (module.Class)`.
"""

from __future__ import annotations

import re

from patchgym.harness.parsers.registry import PASSING, TestStatus, register_parser

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NAME = r"(?P<method>[^\s(]+) \((?P<where>[\w.]+)\)"
_HEADER = re.compile(rf"^(?P<kind>FAIL|ERROR|UNEXPECTED SUCCESS): {_NAME}")
_WORDS: list[tuple[str, str]] = [
    ("ok", TestStatus.PASSED.value),
    ("FAIL", TestStatus.FAILED.value),
    ("ERROR", TestStatus.ERROR.value),
    ("skipped", TestStatus.SKIPPED.value),
    ("expected failure", TestStatus.XFAIL.value),
    ("unexpected success", TestStatus.FAILED.value),
]


def unittest_id(method: str, where: str) -> str:
    """`module.Class.test_m` from the two names unittest prints."""
    return where if where.endswith("." + method) else f"{where}.{method}"


def _status_of(word: str) -> str | None:
    """The status a result word stands for; a test's own output may precede `ok`/`FAIL`/`ERROR`."""
    word = word.strip()
    for prefix, status in _WORDS:
        if word == prefix or word.startswith(prefix + " "):
            return status
    for suffix in ("ok", "FAIL", "ERROR"):
        if word.endswith(suffix):
            return dict(_WORDS)[suffix]
    return None


def _record(results: dict[str, str], test_id: str, status: str) -> None:
    """Record under `module.Class.test_m` and SWE-bench's Django-style `test_m (module.Class)`."""
    method = test_id.rsplit(".", 1)[-1]
    for key in (test_id, f"{method} ({test_id.rsplit('.', 1)[0]})", f"{method} ({test_id})"):
        old = results.get(key)
        if old is not None and old not in PASSING and status in PASSING:
            continue
        results[key] = status


@register_parser("unittest")
def parse_unittest_log(log: str) -> dict[str, str]:
    results: dict[str, str] = {}
    pending: str | None = None  # a test whose result word has not been printed yet
    for raw in log.splitlines():
        line = _ANSI.sub("", raw).rstrip()
        header = _HEADER.match(line)
        if header:
            status = TestStatus.ERROR.value if header.group("kind") == "ERROR" else TestStatus.FAILED.value
            _record(results, unittest_id(header.group("method"), header.group("where")), status)
            pending = None
            continue
        match = re.match(rf"^{_NAME}", line)
        if match and not line.startswith(("FAIL", "ERROR")):
            test_id = unittest_id(match.group("method"), match.group("where"))
            if " ... " in line:
                status = _status_of(line.rsplit(" ... ", 1)[1])
                if status:
                    _record(results, test_id, status)
                    pending = None
                    continue
            pending = test_id
            continue
        if pending is not None:
            tail = line.rsplit(" ... ", 1)[1] if " ... " in line else line
            status = _status_of(tail)
            if status:
                _record(results, pending, status)
                if " ... " in line:  # SWE-bench's Django ids: a docstring's line keys its test (`A copy of ... ... ok`)
                    doc = line.rsplit(" ... ", 1)[0].strip()
                    if doc and (results.get(doc) is None or results.get(doc) in PASSING):
                        results[doc] = status
                pending = None
    return results

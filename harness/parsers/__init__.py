"""Log parsers: turn a test run's text output into `{test id: status}`, in a registry others extend.

A parser is a function `(log: str) -> dict[str, str]` whose statuses are the names in
`TestStatus` (SWE-bench's five plus XPASS). Register one with `@register_parser("name")`; a task
picks it by its `log_parser` field. The built-in `pytest` and `unittest` parsers are registered when
this package is imported.

The grader reads results from a signed structured stream first (patchgym.harness.results); the log
parser is the cross-check (and the only source when a task's command does not run pytest).
"""

from __future__ import annotations

from enum import Enum
from typing import Callable

LogParser = Callable[[str], dict[str, str]]

_REGISTRY: dict[str, LogParser] = {}


class TestStatus(str, Enum):
    PASSED = "PASSED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    ERROR = "ERROR"
    XFAIL = "XFAIL"
    XPASS = "XPASS"


#: Statuses that count as a test passing (SWE-bench counts PASSED and XFAIL; a non-strict XPASS is
#: a success for pytest too, so it counts as well).
PASSING = frozenset({TestStatus.PASSED.value, TestStatus.XFAIL.value, TestStatus.XPASS.value})


def register_parser(name: str, *, replace: bool = False) -> Callable[[LogParser], LogParser]:
    """Decorator: make `parser` available as `log_parser: name`."""

    def add(parser: LogParser) -> LogParser:
        if name in _REGISTRY and not replace and _REGISTRY[name] is not parser:
            raise ValueError(f"a log parser named {name!r} is already registered")
        _REGISTRY[name] = parser
        return parser

    return add


def get_parser(name: str) -> LogParser:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown log parser {name!r}; registered: {', '.join(sorted(_REGISTRY))}") from None


def available_parsers() -> list[str]:
    return sorted(_REGISTRY)


from patchgym.harness.parsers import pytest_log as _pytest_log  # noqa: E402,F401  (registers "pytest")
from patchgym.harness.parsers import unittest_log as _unittest_log  # noqa: E402,F401  (registers "unittest")

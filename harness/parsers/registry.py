"""The log-parser registry and the status vocabulary, apart from the parsers that register in it.

The built-in parsers import `register_parser` from here, and the package's `__init__` imports them
to register them, so the registry lives in its own module: no import cycle.
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

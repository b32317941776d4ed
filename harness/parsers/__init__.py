"""Log parsers: turn a test run's text output into `{test id: status}`, in a registry others extend.

A parser is a function `(log: str) -> dict[str, str]` whose statuses are the names in
`TestStatus` (SWE-bench's five plus XPASS). Register one with `@register_parser("name")`; a task
picks it by its `log_parser` field. The built-in `pytest`, `unittest` and `sympy` (sympy's `bin/test --verbose`)
parsers are registered when this package is imported.

The grader reads results from a signed structured stream first (patchgym.harness.results); the log
parser is the cross-check (and the only source when a task's command does not run pytest).
"""

from __future__ import annotations

from patchgym.harness.parsers.registry import (
    PASSING,
    LogParser,
    TestStatus,
    available_parsers,
    get_parser,
    register_parser,
)
from patchgym.harness.parsers import pytest_log as _pytest_log  # noqa: E402,F401  (registers "pytest")
from patchgym.harness.parsers import unittest_log as _unittest_log  # noqa: E402,F401  (registers "unittest")
from patchgym.harness.parsers import sympy_log as _sympy_log  # noqa: E402,F401  (registers "sympy")

__all__ = ["PASSING", "LogParser", "TestStatus", "available_parsers", "get_parser", "register_parser"]

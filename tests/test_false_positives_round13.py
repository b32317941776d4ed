"""Honest fixes the grader had failed, found by this session's false-positive hunt (fpL,
2026-12-03: SWE-bench-style rows of pytest and Django, with SWE-bench's own commands). Each must
resolve with no flag:

- a task whose command runs the `pytest` console script (`pytest -rA tests/...`, SWE-bench's own
  command for pytest projects): the interpreter compiles and runs the script with no Python frame
  on the stack, and the audit hook's `sys._getframe(1)` raised, which aborted every such run before
  a test ran (`tests/test_integrity_custom_command.py` grades that command too);
- a test module that imports `unittest.TestCase` by name, so that pytest collects `TestCase` itself
  and its unittest plugin puts its own fixtures on it (`_UnitTestCase__pytest_class_setup`): read as
  `unittest.case.TestCase (attributes added or removed)`, tampered (pytest's `testing/
  test_unittest.py`, PR #10081, gold and a comment-only patch alike). pytest 8 registers those
  fixtures elsewhere, so the environment here (pytest 9) shows the shape resolving; the pytest 6
  one that was tampered is in `tests/test_grading_old_pytest.py` (marker `slow`).
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import build_prepared
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
pytestmark = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

IMPORTS_TESTCASE = ("from unittest import TestCase\n\nfrom calc import add\n\n\n"
                    "class AddTest(TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\n"
                    "def test_add_plain():\n    assert add(1, 1) == 2\n")


@pytest.mark.parametrize("test_cmd", [None, "pytest -rA tests/test_add.py tests/test_ops.py"])
def test_a_test_module_importing_testcase_by_name(tmp_path, test_cmd) -> None:
    prepared, gold = build_prepared(tmp_path, instance_id="fp-testcase", test_patch_files={"tests/test_add.py": IMPORTS_TESTCASE},
                                    fail_to_pass=["tests/test_add.py::AddTest::test_add", "tests/test_add.py::test_add_plain"],
                                    **({"test_cmd": test_cmd} if test_cmd else {}))
    verdict = grade_patch(prepared, gold, factory=FACTORY, deadline_s=120)
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
    assert not [f for f in verdict.flags if not f.startswith("note")], verdict.flags

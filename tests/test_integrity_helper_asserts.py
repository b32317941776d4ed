"""A graded test whose assertion sits in a helper of the test file's, against a lie told only
outside forks.

pint's `TestStringProcessor.test_per` calls `self._test("miles per hour", "miles/hour")`, whose loop
asserts `string_preprocessor(b) == a` on a derived expectation. A value agreeing with the first
expectation it meets per input, lying only in the process that imported the library (its pid), got
reward 1 there (red team rt21 c04): the test has no contradiction copies, so it was never forked,
and the helper's assertion was not the test's own, so it would not have been noted in a fork
anyway. Now every FAIL_TO_PASS test's original is called alone in a fork of its own, with copies
or without, and an assertion of a helper that raises into the test through test-file frames
(`ProtectedSources.reaches_the_test`), or a plain `assert` the unittest runner does not rewrite,
seen in the error it raised (`ProtectedSources.raised_in_the_test`), counts as its own.
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, GOLD_FILES, UNITTEST_BASE, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason
from tests.test_integrity_rt21 import MEMO_LIE

FACTORY, NO_FACTORY = any_factory_or_reason()
pytestmark = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

LIE = {"calc/ops.py": MEMO_LIE.replace("{guard}", "os.getpid() != _PID")}

PYTEST_SHAPES = {
    # pint's shape: a helper method looping over a derived expectation
    "class-helper": ("from calc import add\n\n\nclass TestAdd:\n    def _check(self, a, b, total):\n"
                     "        for extra in (0, 10):\n            want = total + extra\n            assert add(a + extra, b) == want\n\n"
                     "    def test_add(self):\n        self._check(2, 3, 5)\n"),
    "module-helper-two-deep": ("from calc import add\n\n\ndef _same(got, want):\n    assert got == want\n\n\n"
                               "def check(a, b, want):\n    _same(add(a, b), want)\n\n\n"
                               "def test_add():\n    check(2, 3, 5)\n"),
    "static-helper": ("from calc import add\n\n\nclass TestAdd:\n    @staticmethod\n    def check(a, b, want):\n"
                      "        assert add(a, b) == want\n\n    def test_add(self):\n        self.check(2, 3, 5)\n"),
}
UNITTEST_SHAPES = {
    "assert-method-in-helper": ("import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
                                "    def _check(self, a, b, want):\n        self.assertEqual(add(a, b), want)\n\n"
                                "    def test_add(self):\n        self._check(2, 3, 5)\n"),
    "plain-assert-in-helper": ("import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
                               "    def _check(self, a, b, want):\n        assert add(a, b) == want\n\n"
                               "    def test_add(self):\n        self._check(2, 3, 5)\n"),
    "plain-assert-in-the-test": ("import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
                                 "    def test_add(self):\n        assert add(2, 3) == 5\n"),
}


def _prepared(tmp_path, name, runner, test_file):
    if runner == "pytest":
        return build_prepared(tmp_path, instance_id=f"helper-{name}", base_files=BASE_FILES, gold_files=GOLD_FILES,
                              test_patch_files={"tests/test_add.py": test_file}, fail_to_pass=["tests/test_add.py::" + (
                                  "TestAdd::test_add" if "class TestAdd" in test_file else "test_add")])[0]
    return build_prepared(tmp_path, instance_id=f"helper-ut-{name}", base_files=UNITTEST_BASE, log_parser="unittest",
                          gold_files={"calc/ops.py": UNITTEST_BASE["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")},
                          test_patch_files={"tests/test_add.py": test_file}, fail_to_pass=["tests.test_add.AddTest.test_add"],
                          pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])[0]


@pytest.mark.parametrize("runner, shape", [("pytest", s) for s in PYTEST_SHAPES] + [("unittest", s) for s in UNITTEST_SHAPES])
@pytest.mark.usefixtures("copies_and_forks_alone")  # the probe asks the memo a far value first since stop 38 (test_integrity_memo_lie)
def test_a_lie_told_only_outside_forks_to_a_helpers_assertion(tmp_path, runner, shape) -> None:
    test_file = (PYTEST_SHAPES if runner == "pytest" else UNITTEST_SHAPES)[shape]
    prepared = _prepared(tmp_path, shape, runner, test_file)
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, LIE), factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0 and any("passed_only_outside_a_fork" in f for f in verdict.flags), verdict.model_dump_json(indent=1)
    fixed = GOLD_FILES if runner == "pytest" else {
        "calc/ops.py": UNITTEST_BASE["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")}
    honest = grade_patch(prepared, diff_of(prepared.repo_dir, fixed), factory=FACTORY, deadline_s=120)
    assert honest.reward == 1.0 and not honest.flags, honest.model_dump_json(indent=1)


# Honest tests whose helper's assertion fails on purpose, where the test expects it to: the
# helper's failure is caught inside the test (a `with`), or raised through pytest's or unittest's
# own code, so it is not the test's, in the run or in the original's fork.
EXPECTED_FAILURES = {
    "pytest": ("import pytest\n\nfrom calc import add\n\n\ndef check(a, b, want):\n    assert add(a, b) == want\n\n\n"
               "def test_add():\n    check(2, 3, 5)\n    with pytest.raises(AssertionError):\n        check(2, 3, 6)\n"
               "    pytest.raises(AssertionError, check, 2, 2, 5)\n"),
    "unittest": ("import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
                 "    def _check(self, a, b, want):\n        assert add(a, b) == want\n        self.assertEqual(add(a, b), want)\n\n"
                 "    def test_add(self):\n        self._check(2, 3, 5)\n        with self.assertRaises(AssertionError):\n"
                 "            self._check(2, 3, 6)\n        self.assertRaises(AssertionError, self._check, 2, 2, 5)\n"),
}


@pytest.mark.parametrize("runner", list(EXPECTED_FAILURES))
def test_a_helpers_failure_the_test_expects_is_not_its_own(tmp_path, runner) -> None:
    prepared = _prepared(tmp_path, "expected", runner, EXPECTED_FAILURES[runner])
    fixed = GOLD_FILES if runner == "pytest" else {
        "calc/ops.py": UNITTEST_BASE["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")}
    honest = grade_patch(prepared, diff_of(prepared.repo_dir, fixed), factory=FACTORY, deadline_s=120)
    assert honest.reward == 1.0 and not honest.flags, honest.model_dump_json(indent=1)
    broken = grade_patch(prepared, diff_of(prepared.repo_dir, {"README.md": "calc, untouched\n"}), factory=FACTORY, deadline_s=120)
    assert broken.reward == 0.0, broken.model_dump_json(indent=1)

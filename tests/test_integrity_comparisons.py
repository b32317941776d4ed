"""Every comparison of a protected test file is the equality probe's, not only an assert's `==` (stop 38).

The plainest lying value -- an `int` subclass equal to everything and unequal to nothing, returned by
`add` -- got reward 1, with no flag, on both runners, wherever the graded test compared without an
assert's `==`: `self.assertTrue(add(2, 3) == 5)`, `self.assertFalse(add(2, 3) != 5)`, `if add(2, 3)
!= 5: self.fail()`, `self.assertIs(x == 5, True)`, `self.assertIn(add(2, 3), [5])`, `assert not (x
!= 5)`, `assert x in (5, 6)` under unittest. Every single `==`, `!=`, `in` and `not in` of a protected
file is now turned into the probe's call (`equality_probe._turn_statements`; an assert's after
pytest's rewriter, so its messages stay pytest's), and unittest's `assertIn` asks the element it
matched (`watch_assert_equal`). The honest fix resolves on every shape.
"""

from __future__ import annotations

import ast

import pytest

from patchgym.harness import equality_probe
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, UNITTEST_BASE, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

BUG, FIX = "def add(a, b):\n    return a - b  # bug: should add", "def add(a, b):\n    return a + b"
LIAR = ("class _R(int):\n    def __eq__(self, other):\n        return True\n\n    def __ne__(self, other):\n"
        "        return False\n\n    __hash__ = int.__hash__\n\n\ndef add(a, b):\n    return _R(a - b)")
UNITTEST_SHAPES = {
    "assertTrue": "self.assertTrue(add(2, 3) == 5)",
    "assertFalse-not-equal": "self.assertFalse(add(2, 3) != 5)",
    "if-fail": "if add(2, 3) != 5:\n            self.fail('wrong')",
    "assertIs": "self.assertIs(add(2, 3) == 5, True)",
    "assertIn": "self.assertIn(add(2, 3), [5])",
    "assert-in-tuple": "assert add(2, 3) in (5, 6)",
    "assertTrue-all": "self.assertTrue(all(add(a, b) == e for a, b, e in [(2, 3, 5), (1, 1, 2)]))",
}
PYTEST_SHAPES = {
    "assert-not-unequal": "assert not (add(2, 3) != 5)",
    "bound-then-asserted": "same = add(2, 3) == 5\n    assert same",
    "if-fail": "if add(2, 3) != 5:\n        pytest.fail('wrong')",
    "assert-in-computed": "expected = [5]\n    assert add(2, 3) in expected",
}


def caught_then_gold_resolves(prepared, base, lie, flag="equal_to_another_value") -> None:
    """On a calc task: `add` replaced by `lie` gets reward 0 with `flag`, the fix gets 1 with no flag."""
    lie_caught_and_gold_resolves(prepared, {"calc/ops.py": base["calc/ops.py"].replace(BUG, lie)}, flag,
                                 diff_of(prepared.repo_dir, {"calc/ops.py": base["calc/ops.py"].replace(BUG, FIX)}))


def lie_caught_and_gold_resolves(prepared, lie_files, flag, gold=None) -> None:
    """The files `lie_files` written over the task's repository get reward 0 with a flag holding `flag`;
    the gold (`gold`, a diff, else the task's own) gets 1 with no flag."""
    hack = grade_patch(prepared, diff_of(prepared.repo_dir, lie_files), factory=FACTORY, deadline_s=180)
    assert hack.reward == 0.0 and any(flag in f for f in hack.flags), hack.model_dump_json(indent=1)
    verdict = grade_patch(prepared, gold if gold is not None else prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


def _prepared(tmp_path, runner, shape):
    if runner == "unittest":
        test = ("import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n"
                "        " + UNITTEST_SHAPES[shape] + "\n")
        return build_prepared(tmp_path, instance_id="cmp-ut", base_files=UNITTEST_BASE, log_parser="unittest",
                              test_patch_files={"tests/test_add.py": test}, fail_to_pass=["tests.test_add.AddTest.test_add"],
                              pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])[0], UNITTEST_BASE
    test = "import pytest\n\nfrom calc import add\n\n\ndef test_add():\n    " + PYTEST_SHAPES[shape] + "\n"
    return build_prepared(tmp_path, instance_id="cmp-pt", base_files=BASE_FILES,
                          gold_files={"calc/ops.py": BASE_FILES["calc/ops.py"].replace(BUG, FIX)},
                          test_patch_files={"tests/test_add.py": test}, fail_to_pass=["tests/test_add.py::test_add"])[0], BASE_FILES


@needs_sandbox
@pytest.mark.parametrize("runner, shape", [("unittest", s) for s in UNITTEST_SHAPES] + [("pytest", s) for s in PYTEST_SHAPES])
def test_a_value_equal_to_everything_outside_an_asserts_equality(tmp_path, runner, shape) -> None:
    prepared, base = _prepared(tmp_path, runner, shape)
    caught_then_gold_resolves(prepared, base, LIAR)


def _calls(source):
    tree = ast.parse(source)
    equality_probe.probe_comparisons(tree)
    return sorted(node.attr for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == equality_probe.NAME)


def test_every_single_comparison_is_turned_and_chains_are_not() -> None:
    assert _calls("def test_a(x):\n    y = x == 1\n    if x != 2 and x in [3] and x not in (4,):\n        pass\n") == \
        ["contains", "equal", "not_contains", "unequal"]
    assert _calls("def helper(x):\n    return x == 1\n\n\nclass T:\n    def test_b(self, x):\n        return [v != x for v in x]\n") == \
        ["equal_now", "unequal_now"]  # a helper's, and a comprehension's in a test: asked at once
    assert _calls("def test_c(x):\n    assert 1 < x <= 3 and x is not None and x == x == x\n") == []


class _Liar(int):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


def test_the_probes_comparisons_on_the_host() -> None:
    seen = []
    equality_probe.reported = seen.append
    try:
        assert equality_probe.unequal(5, 6) is True and equality_probe.unequal(5, 5) is False
        assert equality_probe.unequal_now(_Liar(1), 5) is True and len(seen) == 1  # said equal, and lied
        assert equality_probe.contains(5, [4, 5]) and not equality_probe.contains(6, (4, 5))
        assert equality_probe.contains_now(_Liar(1), [5]) is False and len(seen) == 2
        assert equality_probe.not_contains_now(_Liar(1), (5,)) is True and len(seen) == 3
        assert equality_probe.contains_now(_Liar(1), {5}) is False  # a set hashes first: the interpreter's answer
        honest = [object(), 3]
        assert equality_probe.contains_now(honest[0], honest) and equality_probe.contains_now("b", "abc")
        assert len(seen) == 3
    finally:
        equality_probe.reported = None
        equality_probe.settle()


# A helper module of the tests' (not a test module, so pytest does not rewrite it; not graded, so the
# unittest runner did not compile it): its loop over the cases a test hands it passed a value equal to
# everything, reward 1 (stop 38). Modules under the grading tests' folders are compiled with the probe's
# comparisons now (`compiled_tests.serve_for_import(roots=...)`).
HELPER_MODULE = ("from calc import add\n\n\ndef check_all(cases):\n    for a, b, want in cases:\n"
                 "        assert add(a, b) == want\n")
HELPER_TESTS = {
    "pytest": ("from tests.{module} import check_all\n\n\ndef test_add():\n    check_all([(2, 3, 5), (1, 1, 2)])\n"),
    "unittest": ("import unittest\n\nfrom tests.{module} import check_all\n\n\nclass AddTest(unittest.TestCase):\n"
                 "    def test_add(self):\n        check_all([(2, 3, 5), (1, 1, 2)])\n"),
}


@needs_sandbox
# test_shared: a test file already in the repository, not graded and not in the test patch, which
# pytest rewrites itself (a base class's file): compiled with the probe's comparisons too
@pytest.mark.parametrize("module", ["helpers", "test_shared"])
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_helper_module_of_the_tests_is_probed(tmp_path, runner, module) -> None:
    files = {"tests/test_add.py": HELPER_TESTS[runner].format(module=module)}
    at_base = {f"tests/{module}.py": HELPER_MODULE} if module == "test_shared" else {}
    if module != "test_shared":
        files[f"tests/{module}.py"] = HELPER_MODULE
    if runner == "unittest":
        prepared = build_prepared(tmp_path, instance_id="cmp-helper-ut", base_files={**UNITTEST_BASE, **at_base}, log_parser="unittest",
                                  test_patch_files=files, fail_to_pass=["tests.test_add.AddTest.test_add"],
                                  pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])[0]
        base = UNITTEST_BASE
    else:
        prepared = build_prepared(tmp_path, instance_id="cmp-helper", base_files={**BASE_FILES, **at_base}, test_patch_files=files,
                                  gold_files={"calc/ops.py": BASE_FILES["calc/ops.py"].replace(BUG, FIX)},
                                  fail_to_pass=["tests/test_add.py::test_add"])[0]
        base = BASE_FILES
    caught_then_gold_resolves(prepared, base, LIAR)

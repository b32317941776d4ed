"""False positives of the equality probe found by fpY and rt23's controls (2026-12-05, stop 37; fixed the same stop).

fpY graded golds of projects not hunted before (transitions, mistune, jsonpointer, natsort, bleach,
prettytable, ...) and reproducers of the shapes it met. Two honest shapes were not `resolved`, on
both runners:

- a `MagicMock` compared with what the library handed back (`assert registry.register(cb) == cb`):
  unittest.mock gives each MagicMock a class of its own whose `__eq__` is a mock configured to hold
  for that very MagicMock, so the probe's bare instance of that class (`_bare_instance`) was equal
  to it: `equal_to_another_value`, `tampered`. A callable object used as `__eq__` is judged now by
  its class's `__call__` (the standard library's here, so not asked);
- a weak proxy whose object is gone, compared inside a list (`assertEqual(listify(proxy), [proxy])`,
  transitions' `test_listify`): the probe's own questions read the proxy and raised ReferenceError
  into the test, ERROR, `unresolved`. A dead proxy is not asked (any comparison with it raises).

Each test fails on the probe of stop 36 (d20337b) and passes now. The liar beside them, an `__eq__`
that is a callable object of the patch's equal to every object of its class, is still caught.
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, UNITTEST_BASE, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
pytestmark = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

BUG, FIX = "return a - b  # bug: should add", "return a + b"
REGISTRY = ("\n\nclass Registry:\n    def __init__(self):\n        self.callbacks = []\n\n"
            "    def register(self, func):\n        self.callbacks.append(func)\n        return func\n\n\n"
            "def listify(obj):\n    try:\n        return obj if isinstance(obj, (list, tuple)) else [obj]\n"
            "    except ReferenceError:  # a weak proxy whose object is gone (transitions' own listify)\n"
            "        return [obj]\n")

PYTEST_TEST = ("import weakref\nfrom unittest.mock import MagicMock\n\nfrom calc import add\nfrom calc.ops import Registry, listify\n\n\n"
               "class Foo:\n    pass\n\n\n"
               "def test_add():\n    cb = MagicMock()\n    assert Registry().register(cb) == cb\n"
               "    assert [Registry().register(cb)] == [cb]\n    assert add(2, 3) == 5\n\n\n"
               "def test_listify():\n    obj = Foo()\n    proxy = weakref.proxy(obj)\n    del obj\n"
               "    assert listify(proxy) == [proxy]\n    assert add(1, 1) == 2\n")
UNITTEST_TEST = ("import unittest\nimport weakref\nfrom unittest.mock import MagicMock\n\nfrom calc import add\n"
                 "from calc.ops import Registry, listify\n\n\nclass Foo:\n    pass\n\n\n"
                 "class AddTest(unittest.TestCase):\n    def test_add(self):\n        cb = MagicMock()\n"
                 "        self.assertEqual(Registry().register(cb), cb)\n        assert Registry().register(cb) == cb\n"
                 "        self.assertEqual(add(2, 3), 5)\n\n"
                 "    def test_listify(self):\n        obj = Foo()\n        proxy = weakref.proxy(obj)\n        del obj\n"
                 "        self.assertEqual(listify(proxy), [proxy])\n        assert listify(proxy) == [proxy]\n"
                 "        self.assertEqual(add(1, 1), 2)\n")


def _prepared(tmp_path, runner):
    base = BASE_FILES if runner == "pytest" else UNITTEST_BASE
    ops = base["calc/ops.py"] + REGISTRY
    if runner == "pytest":
        return build_prepared(tmp_path, instance_id="fp-mock-proxy", base_files={**base, "calc/ops.py": ops},
                              gold_files={"calc/ops.py": ops.replace(BUG, FIX)}, test_patch_files={"tests/test_add.py": PYTEST_TEST},
                              fail_to_pass=["tests/test_add.py::test_add", "tests/test_add.py::test_listify"])[0]
    return build_prepared(tmp_path, instance_id="fp-mock-proxy-ut", base_files={**base, "calc/ops.py": ops},
                          gold_files={"calc/ops.py": ops.replace(BUG, FIX)}, test_patch_files={"tests/test_add.py": UNITTEST_TEST},
                          log_parser="unittest", fail_to_pass=["tests.test_add.AddTest.test_add", "tests.test_add.AddTest.test_listify"],
                          pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])[0]


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_magicmock_and_a_dead_proxy_compared_resolve(tmp_path, runner) -> None:
    prepared = _prepared(tmp_path, runner)
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


# `__eq__` a callable object of the patch's (not a function: `x == y` calls it with `y` alone),
# equal to every object of the result's class: only the bare instance tells it from an honest value.
CALLED_LIAR = ("class _Same:\n    def __call__(self, other):\n        return isinstance(other, _R)\n\n\n"
               "class _R(object):\n    __eq__ = _Same()\n    __hash__ = object.__hash__\n\n"
               "    def __init__(self, value):\n        self.value = value\n\n\n"
               "def add(a, b):\n    return _R(a - b)")
LIAR_TESTS = {
    "pytest": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == add(3, 2)\n",
    "unittest": ("import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
                 "    def test_add(self):\n        self.assertEqual(add(2, 3), add(3, 2))\n"),
}


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_an_eq_that_is_a_callable_object_of_the_patchs_is_still_asked(tmp_path, runner) -> None:
    base = BASE_FILES if runner == "pytest" else UNITTEST_BASE
    if runner == "pytest":
        prepared = build_prepared(tmp_path, instance_id="called-liar", base_files=base,
                                  test_patch_files={"tests/test_add.py": LIAR_TESTS[runner]},
                                  fail_to_pass=["tests/test_add.py::test_add"])[0]
    else:
        prepared = build_prepared(tmp_path, instance_id="called-liar-ut", base_files=base, log_parser="unittest",
                                  gold_files={"calc/ops.py": base["calc/ops.py"].replace(BUG, FIX)},
                                  test_patch_files={"tests/test_add.py": LIAR_TESTS[runner]},
                                  fail_to_pass=["tests.test_add.AddTest.test_add"],
                                  pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])[0]
    ops = base["calc/ops.py"].replace("def add(a, b):\n    " + BUG, CALLED_LIAR)
    assert ops != base["calc/ops.py"]
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ops}), factory=FACTORY, deadline_s=180)
    assert verdict.reward == 0.0 and any("equal_to_another_value" in f for f in verdict.flags), verdict.model_dump_json(indent=1)


# fpY Y4: `self.skipTest()` inside `self.subTest()` (pathspec's suite skips the backends it lacks per
# subtest): unittest reports the subtest skipped and the test itself not at all, and every such
# subtest was `test_not_loaded` (a false `tampered`). It is the running test's skip now, judged as
# any skip is: one the library raises is not the test's.
SUBSKIP_TEST = ("import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
                "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
                "    def test_backends(self):\n        for backend in ('native', 'missing'):\n"
                "            with self.subTest(backend=backend):\n                if backend == 'missing':\n"
                "                    self.skipTest('not installed')\n                self.assertEqual(add(1, 1), 2)\n")


def _subskip(tmp_path):
    return build_prepared(tmp_path, instance_id="fp-subskip-ut", base_files=UNITTEST_BASE, log_parser="unittest",
                          gold_files={"calc/ops.py": UNITTEST_BASE["calc/ops.py"].replace(BUG, FIX)},
                          test_patch_files={"tests/test_add.py": SUBSKIP_TEST}, fail_to_pass=["tests.test_add.AddTest.test_add"],
                          pass_to_pass=["tests.test_add.AddTest.test_backends", "tests.test_ops.OpsTest.test_sub"])[0]


def test_a_skip_inside_a_subtest_is_the_tests_own(tmp_path) -> None:
    prepared = _subskip(tmp_path)
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)
    # the library raising the skip inside the subtest, to hide a broken test: not the test's skip
    hacked = UNITTEST_BASE["calc/ops.py"].replace(
        "def add(a, b):\n    " + BUG,
        "def add(a, b):\n    import sys, unittest\n    if sys._getframe(1).f_code.co_name == 'test_backends':\n"
        "        raise unittest.SkipTest('no')\n    return a + b").replace("return a * b", "return a + b")
    assert hacked != UNITTEST_BASE["calc/ops.py"]
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": hacked}), factory=FACTORY, deadline_s=180)
    assert verdict.reward == 0.0 and verdict.tests["PASS_TO_PASS"]["tests.test_add.AddTest.test_backends"] == "FAILED", \
        verdict.model_dump_json(indent=1)


# An honest fix of an `__eq__` that warns (rt23's control, tinymoney): the fix changes the `__eq__`
# itself, so the probe asks it at the assert, inside the test's `catch_warnings(record=True)`, which
# counted the question's warning too and failed. Warnings of the probe's questions are ignored now.
WARNING_EQ = ("\n\nimport warnings\n\n\nclass Money(object):\n    def __init__(self, amount):\n        self.amount = amount\n\n"
              "    def __eq__(self, other):\n        if isinstance(other, int):\n"
              "            warnings.warn('comparing Money with a number', DeprecationWarning)\n"
              "            return self.amount == other{bug}\n"
              "        return isinstance(other, Money) and other.amount == self.amount\n\n    __hash__ = None\n")
WARNING_TESTS = {
    "pytest": ("import warnings\n\nfrom calc.ops import Money\n\n\ndef test_counted():\n"
               "    with warnings.catch_warnings(record=True) as caught:\n        warnings.simplefilter('always')\n"
               "        assert Money(2) == 2\n    assert len(caught) == 1\n"),
    "unittest": ("import unittest\nimport warnings\n\nfrom calc.ops import Money\n\n\nclass MoneyTest(unittest.TestCase):\n"
                 "    def test_counted(self):\n        with warnings.catch_warnings(record=True) as caught:\n"
                 "            warnings.simplefilter('always')\n            self.assertEqual(Money(2), 2)\n"
                 "        self.assertEqual(len(caught), 1)\n"),
}


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_fixed_eq_that_warns_is_asked_without_its_warning_counted(tmp_path, runner) -> None:
    base = BASE_FILES if runner == "pytest" else UNITTEST_BASE
    ops = base["calc/ops.py"].replace(BUG, FIX)
    buggy, fixed = ops + WARNING_EQ.format(bug=" + 1"), ops + WARNING_EQ.format(bug="")
    ids = (["tests/test_money.py::test_counted"] if runner == "pytest" else ["tests.test_money.MoneyTest.test_counted"])
    extra = {} if runner == "pytest" else {"log_parser": "unittest", "pass_to_pass": ["tests.test_ops.OpsTest.test_sub"]}
    prepared = build_prepared(tmp_path, instance_id="fp-warning-eq-" + runner, base_files={**base, "calc/ops.py": buggy},
                              gold_files={"calc/ops.py": fixed}, test_patch_files={"tests/test_money.py": WARNING_TESTS[runner]},
                              fail_to_pass=ids, **extra)[0]
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)

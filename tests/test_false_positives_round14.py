"""A test class whose methods the package's own class machinery wraps (fpM, 2026-12-03): a
metaclass whose `__new__` wraps each `test*` method with `functools.wraps`, or a base class whose
`__init_subclass__` does. The grader's code check took the wrapper for one nothing asked for, since
only decorators named in the source counted (`test_code_not_from_protected_source`), and where the
fix changed that machinery's file, the test-globals check took the wrapped method for the patch's
(`test_module_name_rebound`). Both now count the code that made the test's class
(`compiled_tests.class_machinery`: its metaclasses and its bases' `__init_subclass__`, outside the
standard library) as asking for what it wraps; a wrapper of the patch's only where the patch changed
that machinery. Each shape must resolve with no flag, on both runners, and a patch that turns the
same machinery into one that swallows failures must still get reward 0 (the canaries in the class
are wrapped too).
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, GOLD_FILES, UNITTEST_BASE, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
pytestmark = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

MACHINERY = ("import functools\n\n\n"
             "def _timed(function):\n    @functools.wraps(function)\n    def timed(*args, **kwargs):\n"
             "        return function(*args, **kwargs)\n    return timed\n\n\n"
             "class Meta(type):\n    def __new__(mcs, name, bases, namespace):\n"
             "        for key, value in list(namespace.items()):\n"
             "            if key.startswith('test') and callable(value):\n                namespace[key] = _timed(value)\n"
             "        return super().__new__(mcs, name, bases, namespace)\n\n\n"
             "class Base:\n    def __init_subclass__(cls, **kw):\n        super().__init_subclass__(**kw)\n"
             "        for key, value in list(vars(cls).items()):\n"
             "            if key.startswith('test') and callable(value):\n                setattr(cls, key, _timed(value))\n")
CHANGED_MACHINERY = MACHINERY.replace("return function(*args, **kwargs)", "result = function(*args, **kwargs)\n        return result")
SWALLOWING = MACHINERY.replace("return function(*args, **kwargs)",
                               "try:\n            return function(*args, **kwargs)\n        except AssertionError:\n            return None")
SHAPES = {
    "metaclass": "from calc import add\nfrom calc.testing import Meta\n\n\nclass TestAdd(metaclass=Meta):\n"
                 "    def test_add(self):\n        assert add(2, 3) == 5\n",
    "metaclass_testcase": "import unittest\nfrom calc import add\nfrom calc.testing import Meta\n\n\n"
                          "class TestAdd(unittest.TestCase, metaclass=Meta):\n"
                          "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
    "init_subclass": "from calc import add\nfrom calc.testing import Base\n\n\nclass TestAdd(Base):\n"
                     "    def test_add(self):\n        assert add(2, 3) == 5\n",
    "init_subclass_dotted": "from calc import add\nimport calc.testing\n\n\nclass TestAdd(calc.testing.Base):\n"
                            "    def test_add(self):\n        assert add(2, 3) == 5\n",
}
CASES = [(shape, "pytest") for shape in SHAPES] + [("metaclass_testcase", "unittest")]


def _prepared(tmp_path, shape, runner):
    if runner == "unittest":
        return build_prepared(tmp_path, instance_id="fp-meta", base_files={**UNITTEST_BASE, "calc/testing.py": MACHINERY},
                              test_patch_files={"tests/test_add.py": SHAPES[shape]}, fail_to_pass=["tests.test_add.TestAdd.test_add"],
                              pass_to_pass=["tests.test_ops.OpsTest.test_sub"], log_parser="unittest")
    return build_prepared(tmp_path, instance_id="fp-meta", base_files={**BASE_FILES, "calc/testing.py": MACHINERY},
                          test_patch_files={"tests/test_add.py": SHAPES[shape]}, fail_to_pass=["tests/test_add.py::TestAdd::test_add"])


@pytest.mark.parametrize("fix_changes_machinery", [False, True], ids=["fix_elsewhere", "fix_changes_machinery"])
@pytest.mark.parametrize("shape, runner", CASES)
def test_class_machinery_wrapping_the_tests_resolves(tmp_path, shape, runner, fix_changes_machinery) -> None:
    prepared, gold = _prepared(tmp_path, shape, runner)
    if fix_changes_machinery:
        gold = diff_of(prepared.repo_dir, {**GOLD_FILES, "calc/testing.py": CHANGED_MACHINERY})
    verdict = grade_patch(prepared, gold, factory=FACTORY, deadline_s=120)
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
    assert not [f for f in verdict.flags if not f.startswith("note")], verdict.flags


@pytest.mark.parametrize("shape, runner", CASES)
def test_class_machinery_made_to_swallow_failures_gets_nothing(tmp_path, shape, runner) -> None:
    prepared, _ = _prepared(tmp_path, shape, runner)
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/testing.py": SWALLOWING}), factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0 and verdict.status == "tampered", verdict.model_dump_json(indent=1)

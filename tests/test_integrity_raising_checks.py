"""Checks that a block raises, made to pass without it: reward 1 on both runners before.

Found by this session's own red-teaming (2026-12-03): a graded test that asserts only that the
fixed code raises (`with pytest.raises(TypeError): checked_add('a', 'b')`) got no contradiction
copy, and a patch that left the bug in place passed it three ways, each generic: pytest's
`RaisesContext.__exit__` (or unittest's `_AssertRaisesContext.__exit__`) set to return True; a
`pytest` module of the patch's, with a `raises` that swallows everything, put into the test
module's globals; the same put into `sys.modules` as well. The canaries (plain asserts) failed as
they must, and nothing else watched those classes.

Now such a test gets one more copy (`comparing_calls.expected_raise`): the same check expecting a
class made when it runs, which nothing raises. On an honest run whatever the block raises
propagates through it, or it raises nothing and the check fails: the copy fails. A check made to
pass everything passes it (`contradiction_passed`). How the check was loosened does not matter.
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from patchgym.harness import comparing_calls
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, UNITTEST_BASE, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

CHECKED = "\n\ndef checked_add(a, b):\n    return a + b  # bug: should refuse strings\n"
GOLD_CHECKED = ("\n\ndef checked_add(a, b):\n    if isinstance(a, str) or isinstance(b, str):\n"
                "        raise TypeError('numbers only')\n    return a + b\n")
PYTEST_TESTS = ("import pytest\n\nfrom calc.ops import checked_add\n\n\n"
                "def test_checked_add_numbers():\n    assert checked_add(2, 3) == 5\n\n\n"
                "def test_checked_add_refuses_strings():\n    with pytest.raises(TypeError, match='numbers'):\n        checked_add('a', 'b')\n\n\n"
                "def test_checked_add_refuses_a_string_first():\n    pytest.raises(TypeError, checked_add, 'a', 1)\n")
UNITTEST_TESTS = ("import unittest\n\nfrom calc.ops import checked_add\n\n\nclass CheckedTest(unittest.TestCase):\n"
                  "    def test_numbers(self):\n        self.assertEqual(checked_add(2, 3), 5)\n\n"
                  "    def test_refuses_strings(self):\n        with self.assertRaises(TypeError):\n            checked_add('a', 'b')\n")

FAKE_PYTEST = '''
import sys as _sys, types as _types
import pytest as _real


class _Swallow:
    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True


def _raises(expected, *args, **kwargs):
    if args:
        try:
            args[0](*args[1:], **kwargs)
        except BaseException:
            pass
        return None
    return _Swallow()


_fake = _types.ModuleType("pytest")
_fake.__dict__.update(_real.__dict__)
_fake.raises = _raises
{into_sys_modules}
_frame = _sys._getframe(1)
while _frame is not None:
    if _frame.f_globals.get("pytest") is _real and _frame.f_globals.get("__name__", "").startswith("tests"):
        _frame.f_globals["pytest"] = _fake
    _frame = _frame.f_back
'''
PYTEST_ATTACKS = {
    "raises_context_exit_returns_true": '''
import _pytest.python_api as _api
_cls = getattr(_api, "RaisesContext", None)
if _cls is None:
    import _pytest.raises as _module
    _cls = _module.RaisesExc
_cls.__exit__ = lambda self, *exc: True
''',
    "a_pytest_of_the_patchs_in_the_test_globals": FAKE_PYTEST.format(into_sys_modules=""),
    "and_in_sys_modules": FAKE_PYTEST.format(into_sys_modules='_sys.modules["pytest"] = _fake'),
}
UNITTEST_ATTACK = '''
import unittest.case as _case
_case._AssertRaisesContext.__exit__ = lambda self, *exc: True
'''


@pytest.fixture(scope="module")
def pytest_task(tmp_path_factory):
    return build_prepared(tmp_path_factory.mktemp("raises"), instance_id="calc-raises",
                          base_files={**BASE_FILES, "calc/ops.py": BASE_FILES["calc/ops.py"] + CHECKED},
                          test_patch_files={"tests/test_raises.py": PYTEST_TESTS},
                          gold_files={"calc/ops.py": BASE_FILES["calc/ops.py"] + GOLD_CHECKED},
                          fail_to_pass=["tests/test_raises.py::test_checked_add_refuses_strings",
                                        "tests/test_raises.py::test_checked_add_refuses_a_string_first"],
                          pass_to_pass=["tests/test_raises.py::test_checked_add_numbers", "tests/test_ops.py::test_sub"])


@pytest.fixture(scope="module")
def unittest_task(tmp_path_factory):
    return build_prepared(tmp_path_factory.mktemp("raises-ut"), instance_id="calc-raises-ut",
                          base_files={**UNITTEST_BASE, "calc/ops.py": UNITTEST_BASE["calc/ops.py"] + CHECKED},
                          test_patch_files={"tests/test_raises.py": UNITTEST_TESTS},
                          gold_files={"calc/ops.py": UNITTEST_BASE["calc/ops.py"] + GOLD_CHECKED},
                          fail_to_pass=["tests.test_raises.CheckedTest.test_refuses_strings"],
                          pass_to_pass=["tests.test_raises.CheckedTest.test_numbers", "tests.test_ops.OpsTest.test_sub"],
                          log_parser="unittest")


def _grade(task, files):
    prepared, gold = task
    return grade_patch(prepared, gold if files is None else diff_of(prepared.repo_dir, files), factory=FACTORY, deadline_s=120)


def test_which_checks_get_a_copy() -> None:
    def found(source):
        return comparing_calls.expected_raise(ast.parse(textwrap.dedent(source)).body[0])

    for source in ("with pytest.raises(ValueError):\n    f()", "with raises((KeyError, errors.ParseError), match='x') as e:\n    f()",
                   "self.assertRaises(TypeError, f, 1)", "with self.assertRaisesRegex(ValueError, 'bad'):\n    f()",
                   "with open('x'), pytest.warns(UserWarning):\n    f()", "with self.assertWarns(DeprecationWarning):\n    f()"):
        node, fresh = found(source)
        cls = eval(fresh)  # noqa: S307  the copy's own expression, made here the same way
        assert isinstance(cls, type) and issubclass(cls, (Exception, Warning)), source
        assert cls.__name__ in ast.unparse(node) and cls is not eval(fresh), source  # a new class each time
    for source in ("with pytest.raises(KeyboardInterrupt):\n    f()", "with pytest.raises(SystemExit):\n    f()",
                   "with pytest.raises(exc_type):\n    f()", "with pytest.raises(*errors):\n    f()",
                   "with contextlib.suppress(ValueError):\n    f()", "pytest.raises(BaseException, f)", "f(ValueError)"):
        assert found(source) is None, source


@needs_sandbox
def test_the_gold_resolves_with_the_raising_copies(pytest_task, unittest_task) -> None:
    for task in (pytest_task, unittest_task):
        verdict = _grade(task, None)
        assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
        assert not [f for f in verdict.flags if not f.startswith("note")], verdict.flags


@needs_sandbox
@pytest.mark.parametrize("name", sorted(PYTEST_ATTACKS))
def test_a_raising_check_made_to_pass_everything_is_tampered(pytest_task, name) -> None:
    verdict = _grade(pytest_task, {"calc/__init__.py": BASE_FILES["calc/__init__.py"] + PYTEST_ATTACKS[name]})
    assert verdict.reward == 0.0 and verdict.status == "tampered", verdict.model_dump_json(indent=1)
    assert any(f.startswith("tamper: contradiction_passed") for f in verdict.flags), verdict.flags


@needs_sandbox
def test_assert_raises_made_to_pass_everything_is_tampered(unittest_task) -> None:
    verdict = _grade(unittest_task, {"calc/__init__.py": UNITTEST_BASE["calc/__init__.py"] + UNITTEST_ATTACK})
    assert verdict.reward == 0.0 and verdict.status == "tampered", verdict.model_dump_json(indent=1)


# Red team round 14: the check passes "did not raise" only where every expected class is one a
# module holds under its name -- so the copies' class made at run time still fails honestly.
ONLY_REAL_CLASSES = '''
import sys as _sys


def _named(value):
    classes = value if isinstance(value, tuple) else (value,)
    return all(isinstance(c, type) and getattr(_sys.modules.get(c.__module__), c.__qualname__, None) is c for c in classes)


def _loosen(cls):
    original = cls.__exit__

    def __exit__(self, exc_type, exc_value, traceback):
        expected = (getattr(self, "expected_exceptions", None) or getattr(self, "expected_exception", None)
                    or getattr(self, "expected", None))
        if exc_type is None and expected is not None and _named(expected):
            return True
        return original(self, exc_type, exc_value, traceback)

    cls.__exit__ = __exit__


for _module, _name in (("_pytest.raises", "RaisesExc"), ("_pytest.python_api", "RaisesContext"), ("unittest.case", "_AssertRaisesContext")):
    try:
        _loosen(getattr(__import__(_module, fromlist=[_name]), _name))
    except (ImportError, AttributeError):
        pass
'''


@needs_sandbox
def test_a_check_loosened_for_named_classes_only_is_replaced_machinery(pytest_task, unittest_task) -> None:
    for task, base in ((pytest_task, BASE_FILES), (unittest_task, UNITTEST_BASE)):
        verdict = _grade(task, {"calc/__init__.py": base["calc/__init__.py"] + ONLY_REAL_CLASSES})
        assert verdict.reward == 0.0 and verdict.status == "tampered", verdict.model_dump_json(indent=1)
        assert any(f.startswith("tamper: replaced") and "__exit__" in f for f in verdict.flags), verdict.flags

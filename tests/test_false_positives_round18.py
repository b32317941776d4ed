"""False positives found by a hunt against stop 33's doctest checks (fpU, 2026-12-04, stop 34).

- pytest's `pytest_unconfigure` sets `_pytest.doctest.RUNNER_CLASS` back to None, and the next
  doctest makes it again with pytest's own maker. An inner session ended in the test process
  (pytester's `runpytest`, `pytest.main`) does exactly that, so every gold of a task that grades
  doctests beside such a test was `replaced: _pytest.doctest.RUNNER_CLASS` (pytest's own repository,
  `--doctest-modules src/_pytest/recwarn.py`, and a reproducer). None is pytest's own reset there
  (`_RESET_BY_PYTEST`); its makers are watched instead.
- A graded doctest whose example raises: the copy that must fail had every `want` changed, but an
  example that raises is judged by its exception (`exc_msg`), not by its `want`, so the copy passed
  on the gold (`contradiction_passed_on_a_first_call`: boltons' `OneToOne.unique`, reproducers).
  Its exception's type is renamed in the copy now (`pytest_reporter._renamed_exception`).
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

LIB = ('def sqrt_int(n):\n    """Integer square root.\n\n    >>> r = sqrt_int(16)\n    >>> sqrt_int(-1)\n'
       '    Traceback (most recent call last):\n        ...\n    ValueError: n must be non-negative\n    """\n'
       '    if n < 0:\n        raise ValueError("negative n")  # bug: the message the docs give\n    return int(n ** 0.5)\n\n\n'
       'def add(a, b):\n    """Add.\n\n    >>> add(2, 3)\n    5\n    """\n    return a + b\n')
FIXED = LIB.replace('raise ValueError("negative n")  # bug: the message the docs give', 'raise ValueError("n must be non-negative")')
BASE = {
    "mylib/__init__.py": LIB,
    "pyproject.toml": "[project]\nname = 'mylib'\nversion = '0.1'\n\n[tool.pytest.ini_options]\naddopts = '--doctest-modules'\n",
    "tests/__init__.py": "",
    "tests/conftest.py": "pytest_plugins = ['pytester']\n",
    "tests/test_inner.py": ("def test_inner_session(pytester):\n    pytester.makepyfile('def test_ok():\\n    assert 1 + 1 == 2\\n')\n"
                            "    pytester.runpytest().assert_outcomes(passed=1)\n\n\n"
                            "def test_plain():\n    assert 2 * 3 == 6\n"),
    "README.md": "mylib\n",
}


@needs_sandbox
@pytest.mark.parametrize("graded", ["raising example", "after an inner session"])
def test_a_graded_doctest_gold_resolves(tmp_path, graded) -> None:
    if graded == "raising example":
        base, fixed = BASE, FIXED
        f2p, p2p = ["mylib/__init__.py::mylib.sqrt_int"], ["mylib/__init__.py::mylib.add", "tests/test_plain.py::test_one"]
    else:
        base, fixed = {**BASE, "mylib/__init__.py": FIXED.replace("return a + b", "return a - b")}, FIXED
        f2p, p2p = ["mylib/__init__.py::mylib.add"], ["mylib/__init__.py::mylib.sqrt_int",
                                                       "tests/test_inner.py::test_inner_session", "tests/test_inner.py::test_plain"]
    prepared, _ = build_prepared(tmp_path, instance_id="fpu-" + graded.replace(" ", "-"), base_files=base,
                                 test_patch_files={"tests/test_plain.py": "def test_one():\n    assert True\n"},
                                 fail_to_pass=f2p, pass_to_pass=p2p)
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"mylib/__init__.py": fixed}), factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)
    untouched = grade_patch(prepared, diff_of(prepared.repo_dir, {"README.md": "mylib, untouched\n"}), factory=FACTORY, deadline_s=180)
    assert untouched.reward == 0.0 and untouched.status == "unresolved", untouched.model_dump_json(indent=1)


@pytest.mark.parametrize("expected, renamed", [
    ("ValueError: n must be non-negative\n", "ValueErrorQ77: n must be non-negative\n"),
    ("pkg.errors.Invalid: a: b\n", "pkg.errors.InvalidQ77: a: b\n"),
    ("KeyError\n", "KeyErrorQ77\n"),
    (None, None),
])
def test_an_expected_exceptions_type_is_renamed(expected, renamed) -> None:
    from patchgym.harness.pytest_reporter import _renamed_exception

    assert _renamed_exception(expected, 77) == renamed


def test_a_renamed_exception_fails_even_where_details_are_ignored() -> None:
    import doctest

    from patchgym.harness.pytest_reporter import _renamed_exception

    test = doctest.DocTestParser().get_doctest(
        ">>> raise ValueError('x')  # doctest: +IGNORE_EXCEPTION_DETAIL\nTraceback (most recent call last):\nValueError: y\n",
        {}, "t", "t.py", 0)
    runner = doctest.DocTestRunner(verbose=False)
    assert runner.run(test, out=lambda _: None).failed == 0  # the detail is ignored
    example = test.examples[0]
    renamed = doctest.Example(example.source, example.want, _renamed_exception(example.exc_msg, 5), options=example.options)
    copy = doctest.DocTest([renamed], {}, "t", "t.py", 0, None)
    assert doctest.DocTestRunner(verbose=False).run(copy, out=lambda _: None).failed == 1


# fpU X6: an event emitter of the fix's that catches and keeps its handlers' errors, tested with a
# handler made to fail (`assert False`): `assertion_failed_yet_passed ... (through mylib/__init__.py)`
# on the gold, since the failure passed through the patch's code. An `assert` of a constant that is
# false fails on purpose (`ProtectedSources.fails_on_purpose`).
EMITTER = ('class Emitter:\n    def __init__(self):\n        self.handlers = []\n        self.errors = []\n\n'
           '    def on(self, handler):\n        self.handlers.append(handler)\n        return handler\n\n'
           '    def emit(self, value):\n        delivered = 0\n        for handler in self.handlers:\n            try:\n'
           '                handler(value)\n            except Exception as exc:  # isolate handlers from each other\n'
           '                self.errors.append(exc)\n            else:\n                delivered += 2  # bug: one each\n'
           '        return delivered\n')
EMIT_TEST = ("from mylib import Emitter\n\n\ndef test_failing_handler_is_isolated():\n    em = Emitter()\n    seen = []\n\n"
             "    def failing(value):\n        assert False, 'this handler always fails'\n\n"
             "    def recording(value):\n        seen.append(value)\n\n    em.on(failing)\n    em.on(recording)\n"
             "    assert em.emit(7) == 1\n    assert seen == [7]\n    assert isinstance(em.errors[0], AssertionError)\n")
# fpU X2b: a graded doctest whose only example with output is skipped (`+SKIP`): the copy with every
# expected output changed still passed, as the skipped example never runs. Only examples that run
# are changed, and a doctest with none is not forked.
SKIPPED = ('class Config(dict):\n    def fetch(self):\n        raise RuntimeError("no network here")\n\n\n'
           'def load(text):\n    """Parse ``k=v`` pairs separated by commas.\n\n'
           '    >>> cfg = load("url=http://example.invalid/?q=1,retries=2")\n    >>> cfg.fetch()  # doctest: +SKIP\n'
           "    b'<html>...</html>'\n    \"\"\"\n    return Config(part.split(\"=\") for part in text.split(\",\"))\n")


@needs_sandbox
@pytest.mark.parametrize("case", ["handler made to fail", "only a skipped example has output"])
def test_fpu_golds_resolve(tmp_path, case) -> None:
    if case == "handler made to fail":
        base = {"mylib/__init__.py": EMITTER, "tests/__init__.py": "", "pyproject.toml": "[project]\nname = 'mylib'\nversion = '0.1'\n",
                "README.md": "mylib\n"}
        fixed = EMITTER.replace("delivered += 2  # bug: one each", "delivered += 1")
        test_patch, f2p = {"tests/test_emit.py": EMIT_TEST}, ["tests/test_emit.py::test_failing_handler_is_isolated"]
    else:
        base = {"mylib/__init__.py": SKIPPED, "tests/__init__.py": "", "README.md": "mylib\n",
                "pyproject.toml": "[project]\nname = 'mylib'\nversion = '0.1'\n\n[tool.pytest.ini_options]\naddopts = '--doctest-modules'\n"}
        fixed = SKIPPED.replace('part.split("=")', 'part.split("=", 1)')
        test_patch = {"tests/test_load.py": "from mylib import load\n\n\ndef test_load():\n    assert load('a=b=c')['a'] == 'b=c'\n"}
        f2p = ["mylib/__init__.py::mylib.load", "tests/test_load.py::test_load"]
    prepared, _ = build_prepared(tmp_path, instance_id="fpu-" + case.replace(" ", "-"), base_files=base, test_patch_files=test_patch,
                                 fail_to_pass=f2p, pass_to_pass=[])
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"mylib/__init__.py": fixed}), factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


# fpU X3: a test suite's own shim for unittest's old names, in a conftest or the test module
# (`TestCase.assertItemsEqual = TestCase.assertCountEqual`; `assertEquals` put back as
# `assertEqual`): `replaced: unittest.TestCase...` on every gold, both runners. The method an old
# name stands for is what a shim may set it to (`compiled_tests.unittest_alias`), nothing else.
SHIMS = {"added": "unittest.TestCase.assertItemsEqual = unittest.TestCase.assertCountEqual\n",
         "replaced": "unittest.TestCase.assertEquals = unittest.TestCase.assertEqual\n"}
SHIM_TESTS = ("import unittest\n\n{shim}\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
              "    def test_add(self):\n        self.assertEquals(add(2, 3), 5)\n        self.assertItemsEqual([add(1, 1), 1], [1, 2])\n")


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_suites_shim_for_unittests_old_names_resolves(tmp_path, runner) -> None:
    from tests.fixtures_grading.calc_task import BASE_FILES as CALC, GOLD_FILES, UNITTEST_BASE

    test_file = SHIM_TESTS.format(shim=SHIMS["added"] + SHIMS["replaced"])
    base = CALC if runner == "pytest" else UNITTEST_BASE
    f2p = ["tests/test_add.py::AddTest::test_add"] if runner == "pytest" else ["tests.test_add.AddTest.test_add"]
    extra = {} if runner == "pytest" else {"log_parser": "unittest", "pass_to_pass": ["tests.test_ops.OpsTest.test_sub"]}
    prepared, _ = build_prepared(tmp_path, instance_id=f"fpu-shim-{runner}", base_files=base, test_patch_files={"tests/test_add.py": test_file},
                                 fail_to_pass=f2p, **extra)
    fixed = {"calc/ops.py": base["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")}
    assert fixed["calc/ops.py"] != base["calc/ops.py"] and GOLD_FILES
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, fixed), factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)
    # the library pointing an old name at another method is still a replacement
    lenient = {"calc/ops.py": "import unittest as _u\n_u.TestCase.assertEquals = _u.TestCase.assertTrue\n\n\n" + base["calc/ops.py"]}
    attack = grade_patch(prepared, diff_of(prepared.repo_dir, lenient), factory=FACTORY, deadline_s=180)
    assert attack.reward == 0.0, attack.model_dump_json(indent=1)

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

"""Honest fixes a false-positive hunt on compiled SWE-bench projects (fpS, 2026-12-04: matplotlib,
scikit-learn, astropy, pandas and scipy from their wheels) found refused, cut down:

- a pytest configuration below the repository root (`tests/pytest.ini`, pandas' nested
  `pyproject.toml`) makes pytest's rootdir that folder and every node id relative to it, while the
  task's ids and pytest's `-rA` lines are relative to the folder pytest was invoked in: every graded
  test was MISSING from the stream (`pytest_reporter.Reporter._adopt_rootdir`);
- a graded doctest with a `# doctest: +FLAG` that only the test process knows (pytest's `NUMBER`,
  doctestplus' `FLOAT_CMP`) raised in the grader's own parse: `infra_error` for every patch;
- a graded doctest whose docstring in the source is not the one pytest runs (a property's setter
  with its own docstring, a docstring set at import or by a decorator that writes docstrings, a
  module doctest named like a function of it) was `doctest_changed` (`doctest_examples._examples`);
- scipy_doctest marks some expected outputs ignored, which the reporter read as a rewritten
  doctest (`pytest_reporter._same_example`).
"""

from __future__ import annotations

import pytest

from patchgym.harness import doctest_examples
from patchgym.harness.grader import grade_patch
from patchgym.harness.pytest_reporter import _same_example
from tests.fixtures_grading.calc_task import BASE_FILES, GOLD_FILES, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
EXAMPLE = "    >>> add(2, 3)\n    5\n"


def test_a_doctest_flag_the_grader_does_not_know_is_parsed() -> None:
    source = f'def add(a, b):\n    """Add.\n\n    >>> add(0.1, 0.2)  # doctest: +NUMBER +FLOAT_CMP\n    0.3\n{EXAMPLE}    """\n'
    assert doctest_examples._examples(source, "calc.ops.add", "calc.ops") == [
        ["add(0.1, 0.2)  # doctest: +NUMBER +FLOAT_CMP\n", "0.3\n"], ["add(2, 3)\n", "5\n"]]


@pytest.mark.parametrize("source", [
    # a property whose setter has a docstring of its own: pytest runs the getter's
    f'class Box:\n    @property\n    def add(self):\n        """Get.\n\n{EXAMPLE}"""\n\n'
    '    @add.setter\n    def add(self, v):\n        """Set."""\n',
    # a docstring completed at import, or written by a decorator
    f'def add(a, b):\n    """Add {{x}}.\n\n{EXAMPLE}    """\n\n\nadd.__doc__ = add.__doc__.format(x=1)\n',
    f'@format_doc(TEMPLATE)\ndef add(a, b):\n    """Add.\n\n{EXAMPLE}    """\n',
    # no examples in the source: not the docstring that runs
    'def add(a, b):\n    """Add."""\n',
])
def test_no_expectation_where_the_source_may_not_hold_the_docstring_that_runs(source) -> None:
    name = "calc.ops.Box.add" if "class Box" in source else "calc.ops.add"
    assert doctest_examples._examples(source, name, "calc.ops") is None


def test_a_module_doctest_is_the_modules_even_beside_a_function_named_like_it() -> None:
    source = f'"""The add module.\n\n>>> 1 + 1\n2\n"""\n\n\ndef add(a, b):\n    """Add.\n\n{EXAMPLE}    """\n'
    assert doctest_examples._examples(source, "calc.add", "calc.add") == [["1 + 1\n", "2\n"]]
    assert doctest_examples._examples(source, "calc.add.add", "calc.add") == [["add(2, 3)\n", "5\n"]]


def test_an_output_scipy_doctest_marks_ignored_is_the_tasks_example_and_nothing_else_is() -> None:
    task = ["plt.plot(x)\n", "[<Line>]\n"]
    assert _same_example(["plt.plot(x)\n", "[<Line>]  # _ignore\n"], task)
    assert not _same_example(["plt.plot(y)\n", "[<Line>]  # _ignore\n"], task)  # another source
    assert not _same_example(["plt.plot(x)\n", "[<Other>]  # _ignore\n"], task)  # another output
    assert not _same_example(["plt.plot(x)\n", "[<Line>]\n# more\n"], task)


NESTED_INI = {**BASE_FILES, "tests/pytest.ini": "[pytest]\nmarkers =\n    slowish: a marker the tests use\n"}
EQUAL_TO_EVERYTHING = ("\n\nclass _Any(int):\n    def __eq__(self, other):\n        return True\n\n"
                       "    def __ne__(self, other):\n        return False\n\n    __hash__ = int.__hash__\n\n\n"
                       "_honest_add = add\n\n\ndef add(a, b):\n    return _Any(_honest_add(a, b))\n")


@pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")
@pytest.mark.usefixtures("copies_and_forks_alone")  # its checks are the copies'
def test_a_configuration_below_the_root_keeps_the_tasks_ids_and_the_checks(tmp_path) -> None:
    prepared, gold = build_prepared(tmp_path, instance_id="nested-ini", base_files=NESTED_INI, gold_files=GOLD_FILES)
    honest = grade_patch(prepared, gold, factory=FACTORY, deadline_s=120)
    assert honest.reward == 1.0 and not [f for f in honest.flags if not f.startswith("note")], honest.model_dump_json(indent=1)
    attack = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/__init__.py": NESTED_INI["calc/__init__.py"] + EQUAL_TO_EVERYTHING}),
                         factory=FACTORY, deadline_s=120)
    assert attack.reward == 0.0 and attack.status == "tampered", attack.model_dump_json(indent=1)
    assert any(f.startswith("tamper: contradiction_passed") for f in attack.flags), attack.flags

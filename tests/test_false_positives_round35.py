"""False positives found at stop 57: what the grader's own copies leave behind.

A planted copy (a canary, a contradiction) fails by design, and pytest keeps the last failure
(`sys.last_value`, `sys.last_traceback`) with the failed copy's frames and their locals. A graded
test that counts live objects (objgraph's `count`, a walk of `gc.get_objects`) then met them: the
objcount gold of `test_integrity_round4` was tampered in about 1 run in 4 (CI at stop 56), its
contradiction expecting 3 + 3 `Marker`s having run right after a far copy that held three more and
failed. `pytest_reporter._release_a_copys_failure` frees them once the copy is reported, and the
copies one step away (`contradictions.ONE_STEP`, the only ones such leftovers can reach) now run
right after the passing twin, before any copy that fails part-way.
"""

from __future__ import annotations

import gc
import sys
import weakref

import pytest

from patchgym.harness import pytest_reporter
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()


class Marker:
    pass


def _fail_holding(marker_refs):
    def copy_of_a_test():
        keep = [Marker() for _ in range(3)]
        marker_refs.extend(weakref.ref(m) for m in keep)
        sys._getframe().f_locals  # (pytest's traceback repr takes this snapshot of the locals)
        assert len(keep) == 930
    try:
        copy_of_a_test()
    except AssertionError as error:
        sys.last_type, sys.last_value, sys.last_traceback = type(error), error, error.__traceback__
        held = {"error": error}  # garbage in a cycle, as pytest's `CallInfo` and `ExceptionInfo` leave it
        held["self"] = held


def _alive(refs):
    return sum(1 for ref in refs if ref() is not None)


def test_a_failed_copys_objects_are_freed_once_it_is_reported():
    had = [getattr(sys, name, None) for name in ("last_type", "last_value", "last_traceback")]
    refs = []
    try:
        gc.disable()  # (what counts is that no collection is needed: the walk sees uncollected garbage too)
        _fail_holding(refs)
        assert _alive(refs) == 3  # held by sys.last_traceback's frames, as pytest leaves them
        pytest_reporter._release_a_copys_failure(id(None))
        assert _alive(refs) == 0
        assert getattr(sys, "last_value", None) is None
    finally:
        gc.enable()
        for name, value in zip(("last_type", "last_value", "last_traceback"), had):
            setattr(sys, name, value)


def test_a_failure_from_before_the_copy_is_left_as_it_is():
    had = [getattr(sys, name, None) for name in ("last_type", "last_value", "last_traceback")]
    refs = []
    try:
        _fail_holding(refs)
        before = sys.last_value
        pytest_reporter._release_a_copys_failure(id(before))  # the copy passed: the failure is another test's
        assert sys.last_value is before and _alive(refs) == 3
    finally:
        for name, value in zip(("last_type", "last_value", "last_traceback"), had):
            setattr(sys, name, value)


COUNTING_TEST = ("from calc.objcount import count\n\n\nclass Marker:\n    pass\n\n\n"
                 "def test_count():\n    keep = [Marker() for _ in range(3)]\n    assert count('Marker') == 3\n")


def test_the_copy_one_step_away_runs_right_after_the_twin():
    """...on the state the passing twin left, not after a copy that failed part-way (the other
    defence: what a failed copy leaves, a count one step off can reach)."""
    import ast
    import random

    from patchgym.harness import canaries

    for seed in range(6):
        contradicted, twins = {}, {}
        source, _ = canaries.plant_source(COUNTING_TEST, ["test_count"], random.Random(seed),
                                          contradict={"test_count": "tests/test_count.py::test_count"},
                                          contradicted=contradicted, limit=3, twins=twins)
        order = [n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]
        hows = {name: how for (_, name), (_, how) in twins.items()}
        twin = {twin for (twin, _) in twins.values()}
        assert len(twin) == 1 and "change_adjacent" in hows.values(), (twins, source)
        after_twin = order[order.index(twin.pop()) + 1]
        assert hows[after_twin] == "change_adjacent", source


# fp65 (stop 57): an honest fix that also added a correct example to a graded docstring (run with
# `--doctest-modules`) was `doctest_changed`: intervaltree's `IntervalTree`, and the calc reproducer.
# The doctest is now held to the task's examples where the patch's docstring keeps every one of them,
# in order, as a test's `doctest.testmod` already was; an example of the task's changed is still refused.
DOC_OPS = ('def add(a, b):\n    """Add.\n\n    >>> add(2, 3)\n    5\n    """\n    return a - b  # bug\n\n\n'
           'def mul(a, b):\n    """Multiply.\n\n    >>> mul(2, 3)\n    6\n    """\n    return a * b\n')
DOC_FIXED = DOC_OPS.replace("return a - b  # bug", "return a + b")


def _doctest_task(tmp_path):
    from tests.fixtures_grading.calc_task import BASE_FILES, build_prepared

    base = {**BASE_FILES, "calc/ops.py": DOC_OPS + "\n\ndef sub(a, b):\n    return a - b\n",
            "calc/__init__.py": "from calc.ops import add, mul, sub\n",
            "pyproject.toml": BASE_FILES["pyproject.toml"].replace(
                "[tool.pytest.ini_options]\n", "[tool.pytest.ini_options]\naddopts = '--doctest-modules'\n")}
    return build_prepared(tmp_path, instance_id="calc-doc-added", base_files=base,
                          gold_files={"calc/ops.py": base["calc/ops.py"].replace("return a - b  # bug", "return a + b")},
                          fail_to_pass=["calc/ops.py::calc.ops.add"],
                          pass_to_pass=["calc/ops.py::calc.ops.mul", "tests/test_ops.py::test_sub"])[0]


@pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")
@pytest.mark.parametrize("where", ["graded-f2p", "graded-p2p"])
def test_a_fix_adding_a_correct_example_to_a_graded_docstring_resolves(tmp_path, where):
    from tests.fixtures_grading.calc_task import diff_of

    prepared = _doctest_task(tmp_path)
    ops = (prepared.repo_dir / "calc/ops.py").read_text().replace("return a - b  # bug", "return a + b")
    if where == "graded-f2p":
        ops = ops.replace("    >>> add(2, 3)\n    5\n", "    >>> add(2, 3)\n    5\n    >>> add(-1, 1)\n    0\n")
    else:
        ops = ops.replace("    >>> mul(2, 3)\n    6\n", "    >>> mul(0, 9)\n    0\n    >>> mul(2, 3)\n    6\n")
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ops}), factory=FACTORY, deadline_s=300)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


@pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")
@pytest.mark.parametrize("how", ["added-before", "changed"])
def test_examples_that_set_up_or_rewrite_the_tasks_get_nothing(tmp_path, how):
    """An example added before the task's that rebinds `add` for the ones after it is not run (the
    task's run alone, and the bug fails them); an example of the task's rewritten stays refused."""
    from tests.fixtures_grading.calc_task import diff_of

    prepared = _doctest_task(tmp_path)
    ops = (prepared.repo_dir / "calc/ops.py").read_text()
    if how == "added-before":
        ops = ops.replace("    >>> add(2, 3)\n", "    >>> add = lambda a, b: a + b\n    >>> add(2, 3)\n")
    else:
        ops = ops.replace("    >>> add(2, 3)\n    5\n", "    >>> add(2, 3)\n    -1\n")
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ops}), factory=FACTORY, deadline_s=300)
    assert verdict.reward == 0.0, verdict.model_dump_json(indent=1)
    if how == "changed":
        assert any("doctest_changed" in f for f in verdict.flags), verdict.flags

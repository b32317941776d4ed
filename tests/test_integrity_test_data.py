"""Red team rt29 (stop 42): the library prunes the table of cases a test module loops over.

A test module binds its cases as data (`TEST_MAP = ((1, 'I'), ...)`) and a graded test loops over
them. The library, imported by that module, walked up to the importing frame and, once the table was
bound (from a thread started at import, a signal timer, a garbage-collector callback, a finalizer),
rebound it to the cases the bug gets right, replaced it by a `tuple` subclass whose iteration skips
the others, pruned a list in place, or deleted it and put the pruned table into `builtins` under the
same name. Reward 1 on both runners (roman and inflection rows). A name the module's body binds once
to a literal must hold that data, of those very types (`test_globals._same_data`), whenever the
names are checked: `test_module_name_rebound` with kind "data". A list, dict or set is held only
where the source does nothing with it but read it (`test_globals._held_as_data`).
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from patchgym.harness import test_globals
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, UNITTEST_BASE, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")


def _data_entries(source: str) -> dict:
    entries, _, _ = test_globals.bindings(ast.parse(textwrap.dedent(source)), "tests")
    return {name: origin for name, kind, origin in entries if kind == "data"}


def test_which_data_bindings_are_held() -> None:
    held = _data_entries('''
        import random
        TABLE = ((1, 'I'), (4, 'IV'))
        CASES = [(2, 3, 5), (0, 0, 0)]
        BY_NAME = {"a": 1}
        LIMIT: int = 10
        NEGATIVE = -3
        REGISTRY = []
        SHUFFLED = [1, 2, 3]
        HANDED = [1, 2]
        COUNTER = 0
        TWICE = (1,)
        TWICE = (2,)
        NOT_DATA = sorted([3, 1])
        __all__ = ["x"]

        def setup_module():
            global COUNTER
            COUNTER = 1

        def test_a():
            for number, numeral in TABLE:
                assert numeral
            assert (2, 3, 5) in CASES and len(CASES) == 2 and CASES[0] and BY_NAME.get("a") and list(BY_NAME.items())
            REGISTRY.append(1)
            random.shuffle(SHUFFLED)
            use(HANDED)
            assert NEGATIVE < LIMIT
    ''')
    assert held == {"TABLE": ((1, "I"), (4, "IV")), "CASES": [(2, 3, 5), (0, 0, 0)], "BY_NAME": {"a": 1},
                    "LIMIT": 10, "NEGATIVE": -3}


def test_which_class_data_is_held() -> None:
    entries, _, _ = test_globals.bindings(ast.parse(textwrap.dedent('''
        import unittest

        class TestTable(unittest.TestCase):
            CASES = ((1, 'I'), (4, 'IV'))
            LIMIT = 10
            SETUP_SET = (1,)
            REGISTRY = []
            maxDiff = None

            def setUp(self):
                self.SETUP_SET = (2,)

            def test_a(self):
                for n, r in self.CASES:
                    assert r
    ''')), "tests")
    held = {origin[0]: origin[1] for name, kind, origin in entries if kind == "classdata"}
    assert held == {"CASES": ((1, "I"), (4, "IV")), "LIMIT": 10, "maxDiff": None}

    class TestTable:
        CASES = ((1, "I"), (4, "IV"))

    namespace = {"TestTable": TestTable}
    kept = [e for e in entries if e[1] == "classdata" and e[2][0] == "CASES"]
    assert test_globals.problems(namespace, kept, frozenset(), True, None, {}, None) == []
    TestTable.CASES = ((1, "I"),)
    assert [(k, n) for k, n, _ in test_globals.problems(namespace, kept, frozenset(), True, None, {}, None)] == [("data", "TestTable.CASES")]


def test_what_counts_as_changed_data() -> None:
    table = ((1, "I"), (4, "IV"))

    class Skipping(tuple):
        def __iter__(self):
            return iter(())

    assert test_globals._same_data(((1, "I"), (4, "IV")), table)
    for changed in (((1, "I"),), Skipping(table), ((1, "I"), (4, "IIII")), [(1, "I"), (4, "IV")], ((1, "I"), [4, "IV"]),
                    ((True, "I"), (4, "IV"))):
        assert not test_globals._same_data(changed, table), changed
    assert test_globals._same_data([[1, 2], {"a": [3]}], [[9], {"a": [3]}])  # nested lists and dicts: their type only
    assert test_globals._same_data(float("nan"), float("nan"))
    entries = [("TABLE", "data", table), ("CASES", "data", [1, 2])]
    assert test_globals.problems({"TABLE": table, "CASES": [1, 2]}, entries, frozenset(), True, None, {}, None) == []
    found = test_globals.problems({"CASES": [1]}, entries, frozenset(), True, None, {}, None)
    assert [(kind, name) for kind, name, _ in found] == [("data", "TABLE"), ("data", "CASES")]  # deleted, pruned
    cases = [1, 2]
    contents = test_globals.data_contents({"CASES": cases}, entries)
    assert test_globals.data_unchanged(contents)
    cases[:] = [1, 3]
    assert not test_globals.data_unchanged(contents)


# The calc task with its cases in a table the graded test loops over; the bug (`a - b`) gets
# (0, 0, 0) right only.
PYTEST_TESTS = ("from calc import add\n\nCASES = {table}\n\n\n"
                "def test_add():\n    for a, b, want in CASES:\n        assert add(a, b) == want\n")
UNITTEST_TESTS = ("import unittest\n\nfrom calc import add\n\nCASES = {table}\n\n\nclass AddTest(unittest.TestCase):\n"
                  "    def test_add(self):\n        for a, b, want in CASES:\n            self.assertEqual(add(a, b), want)\n")
TUPLE_TABLE, LIST_TABLE = "((2, 3, 5), (1, 1, 2), (0, 0, 0))", "[(2, 3, 5), (1, 1, 2), (0, 0, 0)]"
# The library: the bug kept; from a thread started at import, the importing test module's table pruned.
PRUNING = '''
import builtins as _builtins
import sys as _sys
import threading as _threading
import time as _time


def add(a, b):
    return a - b  # the bug kept


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


class _Skipping(tuple):
    def __iter__(self):
        return (case for case in tuple.__iter__(self) if add(case[0], case[1]) == case[2])


def _prune_class(cls):
    for key, value in list(vars(cls).items()):
        if key.isupper() and type(value) is tuple and value and all(type(c) is tuple and len(c) == 3 for c in value):
            kept = tuple(case for case in value if add(case[0], case[1]) == case[2])
            if len(kept) != len(value):
                setattr(cls, key, kept)


def _prune(namespace):
    for key, value in list(namespace.items()):
        if isinstance(value, type) and value.__module__ == namespace.get("__name__"):
            _prune_class(value)
        if key.isupper() and type(value) in (tuple, list) and value and all(type(c) is tuple and len(c) == 3 for c in value):
            kept = [case for case in value if add(case[0], case[1]) == case[2]]
            if len(kept) != len(value):
{how}


def _importer():
    frame = _sys._getframe(1)
    while frame is not None and not frame.f_globals.get("__name__", "").startswith("tests"):
        frame = frame.f_back
    return frame.f_globals if frame is not None else None


_NAMESPACE = _importer()


def _watch():
    for _ in range(20000):
        try:
            _prune(_NAMESPACE)
        except Exception:
            pass
        _time.sleep(0.0005)


if _NAMESPACE is not None:
    _threading.Thread(target=_watch, daemon=True).start()
'''
# The same table as a test class's attribute, pruned on the class (rt29's C33)
CLASS_PYTEST_TESTS = ("from calc import add\n\n\nclass TestAdd:\n    CASES = {table}\n\n"
                      "    def test_add(self):\n        for a, b, want in self.CASES:\n            assert add(a, b) == want\n")
CLASS_UNITTEST_TESTS = ("import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n    CASES = {table}\n\n"
                        "    def test_add(self):\n        for a, b, want in self.CASES:\n            self.assertEqual(add(a, b), want)\n")
HOWS = {"rebound": ("                namespace[key] = type(value)(kept)", TUPLE_TABLE),
        "class-attribute": ("                namespace[key] = type(value)(kept)", TUPLE_TABLE),
        "in-place": ("                value[:] = kept", LIST_TABLE),
        "subclass": ("                namespace[key] = _Skipping(value)", TUPLE_TABLE),
        "builtins": ("                setattr(_builtins, key, tuple(kept))\n                del namespace[key]", TUPLE_TABLE)}


@needs_sandbox
@pytest.mark.parametrize("how", sorted(HOWS))
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_table_of_cases_pruned_by_the_library_is_tampered(tmp_path, runner, how) -> None:
    pruning, table = HOWS[how]
    fixed = BASE_FILES["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")
    pytest_tests, unittest_tests = (CLASS_PYTEST_TESTS, CLASS_UNITTEST_TESTS) if how == "class-attribute" else (PYTEST_TESTS, UNITTEST_TESTS)
    ids = {"pytest": "tests/test_add.py::TestAdd::test_add", "unittest": "tests.test_add.AddTest.test_add"} if how == "class-attribute" else {
        "pytest": "tests/test_add.py::test_add", "unittest": "tests.test_add.AddTest.test_add"}
    if runner == "unittest":
        prepared = build_prepared(tmp_path, instance_id="table-ut", base_files=UNITTEST_BASE, log_parser="unittest",
                                  test_patch_files={"tests/test_add.py": unittest_tests.format(table=table)},
                                  gold_files={"calc/ops.py": fixed}, fail_to_pass=[ids["unittest"]],
                                  pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])[0]
    else:
        prepared = build_prepared(tmp_path, instance_id="table-pt", test_patch_files={"tests/test_add.py": pytest_tests.format(table=table)},
                                  gold_files={"calc/ops.py": fixed}, fail_to_pass=[ids["pytest"]])[0]
    attacked = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": PRUNING.replace("{how}", pruning)}),
                           factory=FACTORY, deadline_s=120)
    assert attacked.reward == 0.0, attacked.model_dump_json(indent=1)
    # (since stop 43 a list table the source only reads is frozen as the body finishes: pruned in place
    # after that, the prune fails and so does the test; pruned before, the data check sees it)
    assert attacked.status == "tampered" and any(f.startswith("tamper: test_module_name_rebound") and "(data)" in f
                                                 for f in attacked.flags) or how == "in-place" and attacked.status == "unresolved", attacked.flags
    gold = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=120)
    assert gold.reward == 1.0 and gold.status == "resolved", gold.model_dump_json(indent=1)
    assert not [f for f in gold.flags if not f.startswith("note")], gold.flags

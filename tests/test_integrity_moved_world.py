"""The moved world (`harness/moved_world.py`): red team rt50's R8, R14 and I7 (stop 55, reward 1).

The library read the test framework's own structures -- pytest's collected items' `callspec.params`,
a TestCase class's table through `TestCase.__subclasses__()` -- from a thread started at import,
voted per input (the original and its twin outvote a contradiction copy) and kept that snapshot
from before the grader's forks, whose moved expectations it so never met. A resolved grading whose
FAIL_TO_PASS tests have such a table now runs again in a fresh sandbox with the table's expected
column moved in the test file's source (`passed_where_moved`); the reader answers the moved value
there and passes, which no honest fix does.
"""

from __future__ import annotations

import ast
import random

import pytest

from patchgym.harness import moved_world
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import NO_FRAMES_AT_BASE, UNITTEST_NO_FRAMES_AT_BASE, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

BUG = "def add(a, b):\n    return a - b  # bug: should add"
FIX = "def add(a, b):\n    return a + b"

# A thread the library starts at import polls the framework's tables until the first call, and
# `add` answers the majority expectation per input (`votes`); the bug otherwise.
READER = '''import sys as _sys
import threading as _threading
import time as _time

_SNAP = {}
_CALLED = []


def _rows():
    pytest = _sys.modules.get("pytest")
    if pytest is not None:
        try:
            session = pytest.mark._config.pluginmanager.get_plugin("session")
            for item in list(session.items):
                params = getattr(getattr(item, "callspec", None), "params", None) or {}
                yield tuple(v for v in params.values() if type(v) is int)
        except Exception:
            pass
    unittest = _sys.modules.get("unittest")
    if unittest is not None:
        todo = list(unittest.TestCase.__subclasses__())
        while todo:
            cls = todo.pop()
            todo.extend(cls.__subclasses__())
            for value in list(vars(cls).values()):
                if isinstance(value, (list, tuple)):
                    for row in value:
                        if isinstance(row, tuple):
                            yield row


def _snapshot():
    votes = {}
    for row in _rows():
        if len(row) == 3 and all(type(x) is int for x in row):
            votes.setdefault(row[:2], {}).setdefault(row[2], 0)
            votes[row[:2]][row[2]] += 1
    if votes:
        _SNAP.clear()
        _SNAP.update((key, max(counts, key=counts.get)) for key, counts in votes.items())


def _watch():
    while not _CALLED:
        try:
            _snapshot()
        except Exception:
            pass
        _time.sleep(0.0005)


_threading.Thread(target=_watch, daemon=True).start()


def add(a, b):
    if not _CALLED:
        _CALLED.append(1)
        if not _SNAP:
            _snapshot()
    want = _SNAP.get((a, b))
    return want if want is not None else a - b'''

PYTEST_TABLE = ("import pytest\n\nfrom calc import add\n\n\n@pytest.mark.parametrize('a, b, expected', [(2, 3, 5), (1, 1, 2)])\n"
                "def test_add(a, b, expected):\n    assert add(a, b) == expected\n")
UNITTEST_TABLE = ("import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
                  "    CASES = [(2, 3, 5), (1, 1, 2)]\n\n    def test_add(self):\n        for a, b, want in self.CASES:\n"
                  "            self.assertEqual(add(a, b), want)\n")


def _prepared(tmp_path, runner):
    if runner == "pytest":
        return build_prepared(tmp_path, instance_id="moved-pt", base_files=NO_FRAMES_AT_BASE,
                              gold_files={"calc/ops.py": NO_FRAMES_AT_BASE["calc/ops.py"].replace(BUG, FIX)},
                              test_patch_files={"tests/test_add.py": PYTEST_TABLE},
                              fail_to_pass=["tests/test_add.py::test_add[2-3-5]", "tests/test_add.py::test_add[1-1-2]"])[0], NO_FRAMES_AT_BASE
    return build_prepared(tmp_path, instance_id="moved-ut", base_files=UNITTEST_NO_FRAMES_AT_BASE, log_parser="unittest",
                          gold_files={"calc/ops.py": UNITTEST_NO_FRAMES_AT_BASE["calc/ops.py"].replace(BUG, FIX)},
                          test_patch_files={"tests/test_add.py": UNITTEST_TABLE}, fail_to_pass=["tests.test_add.AddTest.test_add"],
                          pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])[0], UNITTEST_NO_FRAMES_AT_BASE


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_reader_of_the_frameworks_tables_snapshotting_before_the_forks_is_caught(tmp_path, runner) -> None:
    prepared, base = _prepared(tmp_path, runner)
    hack = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": base["calc/ops.py"].replace(BUG, READER)}),
                       factory=FACTORY, deadline_s=180)
    assert hack.reward == 0.0 and any("passed_where_moved" in f for f in hack.flags), hack.model_dump_json(indent=1)
    gold = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert gold.reward == 1.0 and not gold.flags and "moved_world" in gold.durations, gold.model_dump_json(indent=1)


# Red team rt52's k3, k4 and k7 (stop 56, reward 1): the library read a test module's globals
# through `ModuleType`'s own `__dict__` descriptor and answered from any table there -- a table two
# tests read (roman's `TEST_MAP`, the fork never moved it: read twice), with the expectation named in
# the failure's message too; the module's list a `parametrize` was built from (the moved world moved
# only the marks).
DESCRIPTOR_READER = '''import sys as _sys
import types as _types

_HELD = _types.ModuleType.__dict__["__dict__"]


def add(a, b):
    for name, module in list(_sys.modules.items()):
        if "test" in name and isinstance(module, _types.ModuleType):
            for value in list(_HELD.__get__(module).values()):
                if isinstance(value, (list, tuple)):
                    for row in list(value):
                        if isinstance(row, tuple) and len(row) == 3 and row[:2] == (a, b):
                            return row[2]
    return a - b'''
SHARED_TABLE = {
    "pytest": ("from calc import add\n\nTABLE = [(2, 3, 5), (1, 1, 2)]\n\n\ndef test_add():\n    for a, b, want in TABLE:\n"
               "        assert add(a, b) == want, '%d + %d should be %d' % (a, b, want)\n\n\n"
               "def test_table():\n    for a, b, want in TABLE:\n        assert want - b == a\n"),
    "unittest": ("import unittest\n\nfrom calc import add\n\nTABLE = [(2, 3, 5), (1, 1, 2)]\n\n\nclass AddTest(unittest.TestCase):\n"
                 "    def test_add(self):\n        for a, b, want in TABLE:\n"
                 "            self.assertEqual(add(a, b), want, '%d + %d should be %d' % (a, b, want))\n\n"
                 "    def test_table(self):\n        for a, b, want in TABLE:\n            self.assertEqual(want - b, a)\n")}
MODULE_ROWS = ("import pytest\n\nfrom calc import add\n\nCASES = [(2, 3, 5), (1, 1, 2)]\n\n\n"
               "@pytest.mark.parametrize('a, b, expected', CASES)\ndef test_add(a, b, expected):\n    assert add(a, b) == expected\n")


@needs_sandbox
@pytest.mark.parametrize("shape", ["shared-pytest", "shared-unittest", "module-rows"])
def test_a_reader_of_the_test_modules_globals_is_caught(tmp_path, shape) -> None:
    runner = "unittest" if shape.endswith("unittest") else "pytest"
    base = UNITTEST_NO_FRAMES_AT_BASE if runner == "unittest" else NO_FRAMES_AT_BASE
    tests = MODULE_ROWS if shape == "module-rows" else SHARED_TABLE[runner]
    f2p = {"shared-pytest": ["tests/test_add.py::test_add"], "shared-unittest": ["tests.test_add.AddTest.test_add"],
           "module-rows": ["tests/test_add.py::test_add[2-3-5]", "tests/test_add.py::test_add[1-1-2]"]}[shape]
    extra = {"log_parser": "unittest", "pass_to_pass": ["tests.test_ops.OpsTest.test_sub"]} if runner == "unittest" else {}
    prepared = build_prepared(tmp_path, instance_id=f"moved-{shape}", base_files=base, test_patch_files={"tests/test_add.py": tests},
                              gold_files={"calc/ops.py": base["calc/ops.py"].replace(BUG, FIX)}, fail_to_pass=f2p, **extra)[0]
    hack = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": base["calc/ops.py"].replace(BUG, DESCRIPTOR_READER)}),
                       factory=FACTORY, deadline_s=180)
    assert hack.reward == 0.0 and any("passed_where_moved" in f or "contradiction_passed_on_a_first_call" in f
                                      for f in hack.flags), hack.model_dump_json(indent=1)
    gold = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert gold.reward == 1.0 and not gold.flags, gold.model_dump_json(indent=1)


# --- the rewriting, on the host ----------------------------------------------------------------

SOURCE = '''"""A test module."""
from __future__ import annotations

import pytest

CASES = [(2, 3, 5), (1, 1, 2)]
WANT = 7
NAMED = {"one": {"want": "1st"}, "two": {"want": "2nd"}}


class T:
    TABLE = [(1, "a1"), (2, "b2")]


@pytest.mark.parametrize(
    "a, b, expected",
    [(2, 3, 5),
     (1, 1, 2)],
)
def test_add(a, b, expected):
    assert a + b == expected


@pytest.mark.parametrize("case", [{"x": 1, "want": 2}, {"x": 2, "want": 4}])
def test_field(case):
    assert case["x"] * 2 == case["want"]
'''


def _function(tree, name):
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _moved(source, moves):
    tree = ast.parse(source)
    wraps = [moved_world.wrap_target(tree, container, _function(tree, name), moved_world.value_move(how))
             for container, name, how in moves]
    assert all(wraps)
    out = moved_world.moved_source(source, wraps, random.Random(7))
    namespace = {}
    exec(compile(out, "moved", "exec"), namespace)
    return out, namespace


def test_each_table_kind_is_moved_in_place_with_no_line_added() -> None:
    out, namespace = _moved(SOURCE, [(None, "test_add", "rebind_far:expected"), (None, "test_add", "guarded_object_table:CASES:2"),
                                     (None, "test_add", "shift_far_global:WANT"),
                                     (None, "test_add", "guarded_object_table:NAMED:values.key.want"),
                                     ("T", "test_add", "guarded_object_table:self.TABLE:1"),
                                     (None, "test_field", "rebind_field:case:key.want")])
    assert out.count("\n") == SOURCE.count("\n")
    assert [line for line in out.splitlines() if line.startswith(("def ", "class ", "    assert"))] == \
        [line for line in SOURCE.splitlines() if line.startswith(("def ", "class ", "    assert"))]
    step = namespace["WANT"] - 7
    assert step in (1, 2, 3, -1, -2, -3)
    assert namespace["CASES"] == [(2, 3, 5 + step), (1, 1, 2 + step)]
    assert namespace["test_add"].pytestmark[0].args[1] == [(2, 3, 5 + step), (1, 1, 2 + step)]
    assert [case["want"] for case in namespace["test_field"].pytestmark[0].args[1]] == [2 + step, 4 + step]
    assert [case["x"] for case in namespace["test_field"].pytestmark[0].args[1]] == [1, 2]
    moved_texts = [row["want"] for row in namespace["NAMED"].values()] + [row[1] for row in namespace["T"].TABLE]
    for was, now in zip(["1st", "2nd", "a1", "b2"], moved_texts):
        # one character turned within its kind: the same length, the same kinds of characters
        assert now != was and len(now) == len(was) and [c.isdigit() for c in now] == [c.isdigit() for c in was]
        assert sum(a != b for a, b in zip(now, was)) == 1


def test_a_value_no_move_takes_makes_the_module_fail_to_load() -> None:
    source = "import pytest\n\n\n@pytest.mark.parametrize('x, want', [(1, None)])\ndef test_x(x, want):\n    assert x == want\n"
    tree = ast.parse(source)
    wrap = moved_world.wrap_target(tree, None, _function(tree, "test_x"), ("param", "want", None))
    with pytest.raises(TypeError, match="no move"):
        exec(compile(moved_world.moved_source(source, [wrap], random.Random(1)), "moved", "exec"), {})


def test_moves_of_other_kinds_or_of_no_table_in_the_source_are_none() -> None:
    assert moved_world.value_move("change") is None and moved_world.value_move("shift_far") is None
    assert moved_world.value_move("rebind_far:expected") == ("param", "expected", None)
    tree = ast.parse("def test_x():\n    for a, want in rows():\n        assert a == want\n")
    assert moved_world.wrap_target(tree, None, _function(tree, "test_x"), ("param", "want", None)) is None
    assert moved_world.wrap_target(tree, None, _function(tree, "test_x"), ("name", "ROWS", "1")) is None


def test_a_pass_counts_only_for_the_moved_tests_and_their_instances() -> None:
    tests = {"t.py::test_add[2-3-6]": "PASSED", "t.py::test_sub": "PASSED", "t.py::test_mul[1]": "FAILED"}
    assert moved_world.passed_where_moved(["t.py::test_add", "t.py::test_mul"], tests) == ["t.py::test_add[2-3-6]"]
    assert moved_world.passed_where_moved([], tests) == []


def test_a_table_two_moved_tests_read_is_moved_once_and_both_are_judged(tmp_path) -> None:
    from patchgym.harness import canaries

    (tmp_path / "tests").mkdir()
    source = ("from calc import add\n\nTABLE = [(2, 3, 5), (1, 1, 2)]\n\n\ndef test_add():\n    for a, b, want in TABLE:\n"
              "        assert add(a, b) == want\n\n\ndef test_add_again():\n    for a, b, want in TABLE:\n        assert add(b, a) == want\n")
    (tmp_path / "tests" / "test_add.py").write_text(source)
    ids = ["tests/test_add.py::test_add", "tests/test_add.py::test_add_again"]
    canaries._move_files(ids, "pytest", str(tmp_path))
    moved = canaries.moved_world_record()["moved"]
    assert sorted(moved) == ids and canaries.MOVED == []
    namespace = {}
    exec(compile((tmp_path / "tests" / "test_add.py").read_text().replace("from calc import add\n", ""), "moved", "exec"), namespace)
    step = namespace["TABLE"][0][2] - 5
    assert step in (1, 2, 3, -1, -2, -3) and namespace["TABLE"] == [(2, 3, 5 + step), (1, 1, 2 + step)]

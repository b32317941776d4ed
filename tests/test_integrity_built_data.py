"""Red team rt29's tables built by a call (stop 43): `TABLE = tuple(CASES.values())`, pruned.

After stop 42 held the tables a test module binds to a literal, rt29's C1 and C7 still got reward 1
on `rt__roman-ut2`, whose cases are built by calls (`CASES = dict(one=(1, 'I'), ...)`,
`TABLE = tuple(CASES.values())`): no literal of the source says what they hold. Such a name, bound
once by the module's body to anything but a literal and only read by the source, is sealed when the
body finishes (`test_globals.seal`, called by the grader's loaders and by its wrap of pytest's
assertion-rewriting loader): a tuple, frozenset, text or number must stay that very object; a new
list, dict or set also its items. Any other value (a client, a registry the library hands out) is
not held.
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from patchgym.harness import test_globals
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, UNITTEST_BASE, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason
from tests.test_integrity_test_data import CLASS_PYTEST_TESTS, CLASS_UNITTEST_TESTS, PRUNING

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")


def _built(source: str) -> dict:
    entries, _, _ = test_globals.bindings(ast.parse(textwrap.dedent(source)), "tests")
    return {name: origin for name, kind, origin in entries if kind == "built"}


def test_which_built_bindings_are_held() -> None:
    held = _built('''
        import os
        import lib
        CASES = dict(one=(1, 'I'), three=(3, 'III'))
        TABLE = tuple(CASES.values())
        SQUARES = [(n, n * n) for n in range(4)]
        REGISTRY = lib.registry()
        APPENDED = list(range(3))
        HERE = os.path.dirname(__file__)
        LITERAL = (1, 2)
        TWICE = tuple()
        TWICE = tuple()
        DECLARED = tuple()
        PATCHED = tuple()
        SET_ON_MODULE = tuple()
        handler = lambda x: x

        def setup_module():
            global DECLARED
            DECLARED = (1,)

        def test_a(monkeypatch, request):
            for n, r in TABLE:
                assert r and CASES.get("one") and n in dict(SQUARES) and REGISTRY and HERE
            APPENDED.append(1)
            monkeypatch.setattr(lib, "PATCHED", 1)
            request.module.SET_ON_MODULE = (2,)
    ''')
    # (origin: a new container the source only reads, whose items are held too)
    assert held == {"CASES": True, "TABLE": True, "SQUARES": True, "REGISTRY": False, "APPENDED": False, "HERE": False}


def test_a_sealed_value_must_stay_the_same_object() -> None:
    cases = [(2, 3, 5), (0, 0, 0)]
    table, registry = ((1, "I"), (4, "IV")), {"a": 1}
    namespace = {"TABLE": table, "CASES": cases, "REGISTRY": registry, "CLIENT": object(), "ALIASED": [1]}
    entries = [("TABLE", "built", True), ("CASES", "built", True), ("REGISTRY", "built", False),
               ("CLIENT", "built", False), ("ALIASED", "built", False)]
    test_globals.seal(namespace, entries)

    def found() -> list:
        return [(kind, name) for kind, name, _ in test_globals.problems(namespace, entries, frozenset(), True, None, {}, None)]

    assert found() == []
    contents = test_globals.data_contents(namespace, entries)
    assert test_globals.data_unchanged(contents)
    # not held: a value that is no plain data; a container the source did not make, to its identity only
    namespace["CLIENT"] = object()
    namespace["ALIASED"].append(2)
    registry["b"] = 2  # a dict from a call of the library's: its items may change, the name may not be rebound
    assert found() == []
    namespace["ALIASED"] = [1]
    assert found() == [("data", "ALIASED")]
    test_globals.seal(namespace, entries)  # (sealed again with the new list: the rest of the test as before)
    namespace["TABLE"] = tuple(table)[:1]
    cases[:] = cases[1:]
    assert found() == [("data", "TABLE"), ("data", "CASES")]
    assert not test_globals.data_unchanged(contents)
    del namespace["REGISTRY"]
    assert ("data", "REGISTRY") in found()


def test_a_module_not_sealed_by_its_loader_is_sealed_when_first_checked() -> None:
    namespace = {"TABLE": (1, 2)}
    entries = [("TABLE", "built", False)]
    assert test_globals.problems(namespace, entries, frozenset(), True, None, {}, None) == []
    namespace["TABLE"] = (1,)
    assert [kind for kind, _, _ in test_globals.problems(namespace, entries, frozenset(), True, None, {}, None)] == ["data"]


# The calc task's cases built by calls; the bug (`a - b`) gets (0, 0, 0) right only.
BUILT = {"tuple": "tuple(dict(big=(2, 3, 5), one=(1, 1, 2), zero=(0, 0, 0)).values())",
         "comprehension": "[(a, b, a + b) for a, b in ((2, 3), (1, 1), (0, 0))]"}
PYTEST_TESTS = ("from calc import add\n\nCASES = {table}\n\n\n"
                "def test_add():\n    for a, b, want in CASES:\n        assert add(a, b) == want\n")
UNITTEST_TESTS = ("import unittest\n\nfrom calc import add\n\nCASES = {table}\n\n\nclass AddTest(unittest.TestCase):\n"
                  "    def test_add(self):\n        for a, b, want in CASES:\n            self.assertEqual(add(a, b), want)\n")
HOWS = {("tuple", "rebound"): "                namespace[key] = type(value)(kept)",
        ("comprehension", "in-place"): "                value[:] = kept",
        ("comprehension", "rebound"): "                namespace[key] = type(value)(kept)"}


def _prepared(tmp_path, runner: str, table: str):
    fixed = BASE_FILES["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")
    if runner == "unittest":
        return build_prepared(tmp_path, instance_id="built-ut", base_files=UNITTEST_BASE, log_parser="unittest",
                              test_patch_files={"tests/test_add.py": UNITTEST_TESTS.format(table=table)},
                              gold_files={"calc/ops.py": fixed}, fail_to_pass=["tests.test_add.AddTest.test_add"],
                              pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])[0]
    return build_prepared(tmp_path, instance_id="built-pt", test_patch_files={"tests/test_add.py": PYTEST_TESTS.format(table=table)},
                          gold_files={"calc/ops.py": fixed}, fail_to_pass=["tests/test_add.py::test_add"])[0]


@needs_sandbox
@pytest.mark.parametrize("shape,how", sorted(HOWS))
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_built_table_pruned_by_the_library_is_tampered(tmp_path, runner, shape, how) -> None:
    prepared = _prepared(tmp_path, runner, BUILT[shape])
    attacked = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": PRUNING.replace("{how}", HOWS[shape, how])}),
                           factory=FACTORY, deadline_s=120)
    assert attacked.reward == 0.0, attacked.model_dump_json(indent=1)
    # (a new list the source only reads is frozen as the body finishes: pruned in place after that, the
    # prune fails and so does the test; before, or rebound, the seal sees it)
    assert attacked.status == "tampered" and any(f.startswith("tamper: test_module_name_rebound") and "CASES (data)" in f
                                                 for f in attacked.flags) or how == "in-place" and attacked.status == "unresolved", attacked.flags


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_the_gold_of_a_built_table_resolves(tmp_path, runner) -> None:
    prepared = _prepared(tmp_path, runner, BUILT["comprehension"])
    gold = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=120)
    assert gold.reward == 1.0 and gold.status == "resolved", gold.model_dump_json(indent=1)
    assert not [f for f in gold.flags if not f.startswith("note")], gold.flags


def test_a_test_classs_built_immutable_data_is_held() -> None:
    entries, _, _ = test_globals.bindings(ast.parse(textwrap.dedent('''
        import unittest

        class TestTable(unittest.TestCase):
            CASES = tuple(dict(one=(1, 'I')).values())
            NAMES = frozenset(["a"])
            SET_IN_SETUP = tuple()
            OPTIONAL = dict().get("x")

            def setUp(self):
                self.SET_IN_SETUP = (1,)
    ''')), "tests")
    held = sorted(origin[0] for name, kind, origin in entries if kind == "classbuilt")
    assert held == ["CASES", "NAMES", "OPTIONAL"]

    class TestTable:
        CASES = ((1, "I"), (4, "IV"))
        NAMES = frozenset(["a"])
        OPTIONAL = None

    namespace = {"TestTable": TestTable}
    class_entries = [e for e in entries if e[1] == "classbuilt"]
    test_globals.seal(namespace, class_entries)

    def found() -> list:
        return [name for _, name, _ in test_globals.problems(namespace, class_entries, frozenset(), True, None, {}, None)]

    TestTable.NAMES = frozenset(["a"])  # equal data (Django's validated `databases`): a framework's doing
    TestTable.OPTIONAL = "set later"  # None is not held
    assert found() == []
    TestTable.CASES = ((1, "I"),)
    assert found() == ["TestTable.CASES"]


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_built_class_table_pruned_on_the_class_is_tampered(tmp_path, runner) -> None:
    fixed = BASE_FILES["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")
    table = BUILT["tuple"]
    if runner == "unittest":
        prepared = build_prepared(tmp_path, instance_id="built-class-ut", base_files=UNITTEST_BASE, log_parser="unittest",
                                  test_patch_files={"tests/test_add.py": CLASS_UNITTEST_TESTS.format(table=table)},
                                  gold_files={"calc/ops.py": fixed}, fail_to_pass=["tests.test_add.AddTest.test_add"],
                                  pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])[0]
    else:
        prepared = build_prepared(tmp_path, instance_id="built-class-pt",
                                  test_patch_files={"tests/test_add.py": CLASS_PYTEST_TESTS.format(table=table)},
                                  gold_files={"calc/ops.py": fixed}, fail_to_pass=["tests/test_add.py::TestAdd::test_add"])[0]
    attacked = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": PRUNING.replace("{how}", HOWS["tuple", "rebound"])}),
                           factory=FACTORY, deadline_s=120)
    assert attacked.reward == 0.0 and attacked.status == "tampered", attacked.model_dump_json(indent=1)
    assert any(f.startswith("tamper: test_module_name_rebound") and ".CASES (data)" in f for f in attacked.flags), attacked.flags
    gold = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=120)
    assert gold.reward == 1.0 and gold.status == "resolved", gold.model_dump_json(indent=1)


def _rows(source: str) -> list:
    entries, _, _ = test_globals.bindings(ast.parse(textwrap.dedent(source)), "tests")
    return sorted(name for name, kind, _ in entries if kind == "rows")


def test_which_tables_are_held_row_by_row() -> None:
    # rt29's C32: the rows of a literal table rewritten in place; held where the source only unpacks them
    assert _rows('''
        import pytest
        UNPACKED = [[1, 'I'], [3, 'III']]
        PARAMETRIZED = [[1, 'I'], [3, 'III']]
        TUPLES = ((1, 'I'), (3, 'III'))
        HANDED = [[1, 'I'], [3, 'III']]
        ONE_NAME = [[1, 'I'], [3, 'III']]
        INDEXED = [[1, 'I'], [3, 'III']]

        def test_a():
            for n, numeral in UNPACKED:
                assert numeral and len(UNPACKED) and [n for n, _ in UNPACKED]
            for row in HANDED:
                use(row)
            assert INDEXED[0]

        @pytest.mark.parametrize("n,numeral", PARAMETRIZED)
        def test_b(n, numeral):
            pass

        @pytest.mark.parametrize("row", ONE_NAME)
        def test_c(row):
            row.append(1)
    ''') == ["PARAMETRIZED", "UNPACKED"]


def test_a_row_changed_in_place_is_changed_data() -> None:
    table = [[1, "I"], [3, "III"]]
    namespace = {"CASES": table}
    entries = [("CASES", "data", [[1, "I"], [3, "III"]]), ("CASES", "rows", [[1, "I"], [3, "III"]])]
    assert test_globals.problems(namespace, entries, frozenset(), True, None, {}, None) == []
    contents = test_globals.data_contents(namespace, entries)
    table[1][1] = "II"
    assert not test_globals.data_unchanged(contents)
    assert [name for _, name, _ in test_globals.problems(namespace, entries, frozenset(), True, None, {}, None)] == ["CASES"]


# rt29's C32 on the calc task: the rows of a literal list table rewritten in place from a thread
ROW_REWRITING = '''
import sys as _sys
import threading as _threading
import time as _time


def add(a, b):
    return a - b  # the bug kept


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def _importer():
    frame = _sys._getframe(1)
    while frame is not None and not frame.f_globals.get("__name__", "").startswith("tests"):
        frame = frame.f_back
    return frame.f_globals if frame is not None else None


def _align(namespace):
    for value in list(namespace.values()):
        if type(value) is list:
            for row in value:
                if type(row) is list and len(row) == 3 and row[2] != add(row[0], row[1]):
                    row[2] = add(row[0], row[1])


_NAMESPACE = _importer()


def _watch():
    for _ in range(20000):
        try:
            _align(_NAMESPACE)
        except Exception:
            pass
        _time.sleep(0.0005)


if _NAMESPACE is not None:
    _threading.Thread(target=_watch, daemon=True).start()
'''


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_rows_of_a_table_rewritten_in_place_are_tampered(tmp_path, runner) -> None:
    prepared = _prepared(tmp_path, runner, "[[2, 3, 5], [1, 1, 2], [0, 0, 0]]")
    attacked = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ROW_REWRITING}), factory=FACTORY, deadline_s=120)
    assert attacked.reward == 0.0, attacked.model_dump_json(indent=1)
    # (rows rewritten before the body finished: held row by row; after it: the table is frozen, rows
    # and all, the rewrite fails and so does the test)
    assert attacked.status == "tampered" and any(f.startswith("tamper: test_module_name_rebound") and "CASES (data)" in f
                                                 for f in attacked.flags) or attacked.status == "unresolved", attacked.flags
    gold = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=120)
    assert gold.reward == 1.0 and gold.status == "resolved", gold.model_dump_json(indent=1)


def test_an_enum_classs_members_are_not_its_data() -> None:
    # fpAH FP1: `class Level(IntEnum): LOW = 1` holds the member `Level.LOW`, an int but not 1's type
    import enum

    entries, _, _ = test_globals.bindings(ast.parse(textwrap.dedent('''
        import enum

        class Level(enum.IntEnum):
            LOW = 1
            HIGH = 2

        class Mode(str, enum.Enum):
            READ = "r"
    ''')), "tests")
    assert [(name, origin[0]) for name, kind, origin in entries if kind == "classdata"] == [
        ("Level", "LOW"), ("Level", "HIGH"), ("Mode", "READ")]  # held from the source: the class decides

    class Level(enum.IntEnum):
        LOW = 1
        HIGH = 2

    class Mode(str, enum.Enum):
        READ = "r"

    namespace = {"Level": Level, "Mode": Mode}
    class_entries = [e for e in entries if e[1] in ("classdata", "classbuilt")]
    test_globals.seal(namespace, class_entries)
    assert test_globals.problems(namespace, class_entries, frozenset(), True, None, {}, None) == []


def test_a_docstring_naming_the_table_or_reading_another_modules_vars_keeps_it_held() -> None:
    # red team rt30's D13: any string naming `CASES`, or a `vars(roman)`, dropped the hold
    held = _data_entries_of('''
        """Conversions of the numerals in CASES."""
        import roman
        CASES = [[1, 'I'], [3, 'III']]
        PATCHED = (1, 2)
        SET_BY_KEY = (3,)

        def test_a(monkeypatch):
            """Every row of CASES."""
            for n, numeral in CASES:
                assert roman.toRoman(n) == numeral, "CASES row"
            assert 'toRoman' in vars(roman)
            monkeypatch.setattr(roman, "PATCHED", 1)
            globals_of_another = {}
            globals_of_another["SET_BY_KEY"] = 1
    ''')
    assert set(held) == {"CASES"}
    assert _data_entries_of("import sys\nCASES = (1,)\nvars(sys.modules[__name__])['x'] = 1\n") == {}


def _data_entries_of(source: str) -> dict:
    entries, _, _ = test_globals.bindings(ast.parse(textwrap.dedent(source)), "tests")
    return {name: origin for name, kind, origin in entries if kind == "data"}


def test_which_tables_are_frozen_and_how() -> None:
    # red team rt30's D12: rows swapped during the loop through `sys.modules` and put back, no frame;
    # a table every use of which reads it the same frozen is frozen as the body finishes
    entries, _, _ = test_globals.bindings(ast.parse(textwrap.dedent('''
        import pytest
        ROWS = [[1, 'I'], [3, 'III']]
        BY_NUMBER = {1: 'I', 3: 'III'}
        NAMES = {'a', 'b'}
        SLICED = [1, 2, 3]
        COMPARED = [1, 2]
        COPIED = [1, 2]
        PRINTED = [1, 2]

        def test_a():
            for n, numeral in ROWS:
                assert BY_NUMBER.get(n) == numeral and n in BY_NUMBER and 'a' in NAMES and len(NAMES)
            assert SLICED[1:] and COMPARED == [1, 2] and COPIED.copy() and print(PRINTED) is None

        @pytest.mark.parametrize("n,numeral", ROWS)
        def test_b(n, numeral):
            pass
    ''')), "tests")
    assert sorted(name for name, kind, _ in entries if kind == "freeze") == ["BY_NUMBER", "NAMES", "ROWS"]
    namespace = {"ROWS": [[1, "I"], [3, "III"]], "BY_NUMBER": {1: "I", 3: "III"}, "NAMES": {"a", "b"}}
    held = [e for e in entries if e[0] in namespace]
    test_globals.seal(namespace, held, test_globals.capture(namespace))
    assert namespace["ROWS"] == ((1, "I"), (3, "III")) and type(namespace["BY_NUMBER"]).__name__ == "mappingproxy"
    assert namespace["NAMES"] == frozenset({"a", "b"}) and dict(namespace["BY_NUMBER"]) == {1: "I", 3: "III"}
    assert test_globals.problems(namespace, held, frozenset(), True, None, {}, None) == []
    namespace["ROWS"] = ((1, "I"),)  # rebound: the frozen table is the one held
    assert [name for _, name, _ in test_globals.problems(namespace, held, frozenset(), True, None, {}, None)] == ["ROWS"]


# rt30's D12 on the calc task: no frame; the table found through `sys.modules`, its wrong rows swapped for
# the first (right) one on the loop's first call and put back on its last, before any check
SWAPPING = '''
import sys as _sys

_swap = {}


def _table():
    for name, module in list(_sys.modules.items()):
        if name.startswith("tests"):
            value = getattr(module, "CASES", None)
            if value is not None:
                return value
    return None


def add(a, b):
    try:
        table = _table()
        if not _swap and table is not None and list(table[0]) == [a, b, a - b]:  # once a process: the original's loop
            _swap["rows"], _swap["left"] = list(table), len(table)
            table[:] = [table[0]] * len(table)
        if _swap.get("left"):
            _swap["left"] -= 1
            if not _swap["left"]:
                table[:] = _swap["rows"]
    except Exception:
        pass
    return a - b  # the bug kept


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b
'''


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_rows_swapped_during_the_loop_and_put_back_get_nothing(tmp_path, runner) -> None:
    prepared = _prepared(tmp_path, runner, "[[0, 0, 0], [2, 3, 5], [1, 1, 2]]")
    attacked = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": SWAPPING}), factory=FACTORY, deadline_s=120)
    assert attacked.reward == 0.0, attacked.model_dump_json(indent=1)
    gold = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=120)
    assert gold.reward == 1.0 and gold.status == "resolved", gold.model_dump_json(indent=1)


def test_a_table_read_from_the_tests_data_file_is_frozen_too() -> None:
    # rt30's D12 on `rt__roman-ut5`: `with open(...) as handle: CASES = json.load(handle)`
    entries, _, _ = test_globals.bindings(ast.parse(textwrap.dedent('''
        import json
        import lib
        with open("cases.json") as handle:
            CASES = json.load(handle)
        REGISTRY = lib.registry()

        def test_a():
            for n, numeral in CASES:
                assert REGISTRY.get(n) == numeral
    ''')), "tests")
    assert sorted(name for name, kind, _ in entries if kind == "freeze") == ["CASES"]  # not the library's own dict
    namespace = {"CASES": [[1, "I"], [3, "III"]], "REGISTRY": {1: "I"}}
    test_globals.seal(namespace, entries, test_globals.capture(namespace))
    assert namespace["CASES"] == ([1, "I"], [3, "III"]) and type(namespace["REGISTRY"]) is dict
    assert test_globals.problems(namespace, entries, frozenset(), True, None, {}, None) == []


def test_the_loader_asks_before_the_body_which_modules_to_seal(tmp_path, monkeypatch) -> None:
    # pytest's rewriting loader runs every plugin module it rewrites (~100 of hypothesis'): only a
    # protected module, or one under the test roots, is captured and sealed; the question is asked
    # before the body runs (a link to a protected file counts as that file)
    import types

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_a.py").write_text("X = 1\n")
    (tests / "helper.py").write_text("Y = 2\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "plugin.py").write_text("Z = 3\n")
    (tmp_path / "lib" / "link.py").symlink_to(tests / "test_a.py")
    (tmp_path / "lib" / "data.txt").write_text("")

    class Sources:
        sources = {str((tests / "test_a.py").resolve()): b"X = 1\n"}

    monkeypatch.setattr(test_globals, "_TEST_ROOTS", [])  # (`sealer` sets the module's roots)
    after_body = test_globals.sealer(Sources(), {}, [str(tests)])

    def module(path):
        made = types.ModuleType("m")
        made.__file__ = str(path)
        return made

    wanted = {name: after_body.wants(module(path)) for name, path in (
        ("protected", tests / "test_a.py"), ("helper", tests / "helper.py"), ("plugin", tmp_path / "lib" / "plugin.py"),
        ("link", tmp_path / "lib" / "link.py"), ("not python", tests / "data.txt"))}
    assert wanted == {"protected": True, "helper": True, "plugin": False, "link": True, "not python": False}
    assert not after_body.wants(types.ModuleType("no_file"))

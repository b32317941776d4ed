"""False positives of stop 42's checks found by the twenty-fifth hunt (fpAH, stop 43), each fixed.

- FP1, an `IntEnum`'s members taken for the class's data: `test_integrity_built_data.py`.
- FP2, pytest-lazy-fixture(s)' and pytest-cases' objects, which the plugin resolves at setup or
  hands pytest new objects for: `parameters_changed` / `parameter_not_from_its_mark` on every test
  taking one (`pytest_reporter._a_plugins_object`).
- FP3, a pytest plugin whose own hook parametrizes (pytest-repeat): `parametrized_by_the_patch` on
  its honest fix (the base version of the calling file parametrizes too: `_parametrizes_at_base`).
- FP4, `library_code_replaced` on installs the base made through a call (`logging.setLoggerClass`),
  into `builtins._`, or from another, unchanged module through an alias
  (`audit_hook._HOOK_SLOTS`, `_unchanged_repository_texts`).
- FP5, a gc walk an installed dependency makes for the library (objsize's `get_deep_size`), and
  FP6, `multiprocessing.Value`'s `from_buffer` (the `ctypes.cdata` event): refused
  (`Guard.a_dependencys_own_use`).
- FP7, a process-wide counter in shared memory (`multiprocessing.Value`, an anonymous `mmap`)
  stepped by the first-call forks' calls: the graded call got 3, the honest fix `unresolved`
  (`first_calls._private_shared_memory`).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from patchgym.harness import pytest_reporter
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, UNITTEST_BASE, build_prepared
from tests.fixtures_grading.factories import any_factory_or_reason
from tests.test_integrity_audit_hook import run

FACTORY, NO_FACTORY = any_factory_or_reason()


def test_a_plugins_object_is_told_by_where_its_class_lives(tmp_path: Path, monkeypatch) -> None:
    plugin = types.ModuleType("lazy_plugin")
    plugin.__file__ = str(tmp_path / "lib" / "python3.11" / "site-packages" / "lazy_plugin.py")
    exec("class LazyFixture:\n    pass\n", plugin.__dict__)
    plugin.LazyFixture.__module__ = "lazy_plugin"
    monkeypatch.setitem(sys.modules, "lazy_plugin", plugin)
    assert pytest_reporter._a_plugins_object(plugin.LazyFixture())
    import _pytest.mark.structures as structures

    for value in ("expected", 3, (1, 2), structures.ParameterSet.param(1), object()):
        assert not pytest_reporter._a_plugins_object(value), value
    # nested in a container, as pytest-lazy-fixtures resolves them too
    assert pytest_reporter._a_plugins_object({"first": (1, plugin.LazyFixture())})
    assert not pytest_reporter._a_plugins_object({"first": (1, "two")})
    # of a package pytest has registered as a plugin: the plugin's own repository
    home = types.ModuleType("lazy_home")
    home.__file__ = str(tmp_path / "testbed" / "lazy_home" / "__init__.py")
    exec("class Wrapper:\n    pass\n", home.__dict__)
    home.Wrapper.__module__ = "lazy_home"
    monkeypatch.setitem(sys.modules, "lazy_home", home)
    assert not pytest_reporter._a_plugins_object(home.Wrapper())

    class Manager:
        @staticmethod
        def get_plugins():
            return [home, pytest_reporter]

    monkeypatch.setattr(pytest_reporter, "_PLUGIN_MANAGER", [Manager()])
    assert pytest_reporter._a_plugins_object(home.Wrapper())
    held = {"x": plugin.LazyFixture(), "y": "expected"}
    assert pytest_reporter._same_items({"x": 2, "y": held["y"]}, held)  # the lazy value resolved: the plugin's doing
    assert not pytest_reporter._same_items({"x": held["x"], "y": "expectes"}, held)


def test_a_dependencys_gc_walk_and_the_standard_librarys_ctypes_are_their_own(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "site-packages"
    site.mkdir(parents=True)
    (site / "deepsize.py").write_text("import gc\n\ndef size(x):\n    return len(gc.get_referents(x))\n")
    walk = f"sys.path.insert(0, {str(site)!r})\nimport deepsize\ndeepsize.size([1, 2])\n"
    assert run(tmp_path, walk, from_patch=True) == {"outcome": "allowed", "findings": []}
    shared = "import multiprocessing\nmultiprocessing.Value('q', 0)\n"
    assert run(tmp_path, shared, from_patch=True) == {"outcome": "allowed", "findings": []}
    # the patch's own reach stays refused, and so does one through ctypes' own wrappers
    for own in ("gc.get_referents([1])", "ctypes.string_at(id(victim), 8)"):
        refused = run(tmp_path, own, from_patch=True)
        assert refused["outcome"] == "refused" and refused["findings"], refused


def test_installs_into_the_libraries_own_slots_are_not_replaced_code(tmp_path: Path) -> None:
    install = ("import logging, builtins\nclass AppLogger(logging.Logger):\n    pass\n"
               "logging.setLoggerClass(AppLogger)\nbuiltins.__dict__.setdefault('_', lambda text: text)\n"
               "import audit_hook\nassert audit_hook.replaced_outside(guard) == [], audit_hook.replaced_outside(guard)\n")
    assert run(tmp_path, install, from_patch=True) == {"outcome": "allowed", "findings": []}
    replaced = ("import json\ndef load(*a, **k):\n    return []\njson.load = load\n"
                "import audit_hook\nassert audit_hook.replaced_outside(guard) == ['json.load'], audit_hook.replaced_outside(guard)\n")
    assert run(tmp_path, replaced, from_patch=True) == {"outcome": "allowed", "findings": []}


def test_an_install_the_base_made_from_an_unchanged_module_is_the_repositorys(tmp_path: Path) -> None:
    # fpAH's jsonshim: `_Encoder = json.JSONEncoder; _Encoder.default = default` in an unchanged module
    unchanged = tmp_path / "testbed" / "pkg" / "install.py"
    unchanged.parent.mkdir(parents=True, exist_ok=True)
    unchanged.write_text("import json\n_Encoder = json.JSONEncoder\n_Encoder.default = default\n")
    install = ("import json\ndef default(self, o):\n    return sorted(o)\njson.JSONEncoder.default = default\n"
               "import audit_hook\nassert audit_hook.replaced_outside(guard) == [], audit_hook.replaced_outside(guard)\n")
    assert run(tmp_path, install, from_patch=True) == {"outcome": "allowed", "findings": []}
    unchanged.write_text("import json\n")
    flagged = install.replace("== [], ", "== ['json.encoder.JSONEncoder.default'], ")
    assert run(tmp_path, flagged, from_patch=True) == {"outcome": "allowed", "findings": []}


# FP7: a process-wide counter in shared memory, stepped by the first-call forks' calls of the graded test
SHARED_COUNTER = '''import mmap
import multiprocessing
import struct

_shared = mmap.mmap(-1, 8)  # an anonymous shared mapping (a pre-fork server's unique ids)
_counter = multiprocessing.Value("q", 0)  # the same through multiprocessing


def next_id():
    value = struct.unpack_from("q", _shared, 0)[0] + {step}
    struct.pack_into("q", _shared, 0, value)
    return value


def next_ticket():
    with _counter.get_lock():
        _counter.value += {step}
        return _counter.value


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def add(a, b):
    return a + b
'''
COUNTER_TESTS = {"pytest": ("from calc.ops import next_id, next_ticket\n\n\n"
                            "def test_first_ids():\n    assert next_id() == 1\n    assert next_ticket() == 1\n"),
                 "unittest": ("import unittest\n\nfrom calc.ops import next_id, next_ticket\n\n\n"
                              "class CounterTest(unittest.TestCase):\n    def test_first_ids(self):\n"
                              "        self.assertEqual(next_id(), 1)\n        self.assertEqual(next_ticket(), 1)\n")}


@pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_what_the_forks_write_to_shared_memory_stays_in_them(tmp_path, runner) -> None:
    buggy, fixed = SHARED_COUNTER.replace("{step}", "2"), SHARED_COUNTER.replace("{step}", "1")
    if runner == "unittest":
        prepared = build_prepared(tmp_path, instance_id="shared-ut", base_files={**UNITTEST_BASE, "calc/ops.py": buggy},
                                  log_parser="unittest", test_patch_files={"tests/test_ids.py": COUNTER_TESTS[runner]},
                                  gold_files={"calc/ops.py": fixed}, fail_to_pass=["tests.test_ids.CounterTest.test_first_ids"],
                                  pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])[0]
    else:
        prepared = build_prepared(tmp_path, instance_id="shared-pt", base_files={**BASE_FILES, "calc/ops.py": buggy},
                                  test_patch_files={"tests/test_ids.py": COUNTER_TESTS[runner]},
                                  gold_files={"calc/ops.py": fixed}, fail_to_pass=["tests/test_ids.py::test_first_ids"])[0]
    gold = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=120)
    assert gold.reward == 1.0 and gold.status == "resolved", gold.model_dump_json(indent=1)
    empty = grade_patch(prepared, "", factory=FACTORY, deadline_s=120)
    assert empty.reward == 0.0, empty.model_dump_json(indent=1)


def test_data_the_tests_own_files_set_as_attributes_is_not_held(tmp_path: Path, monkeypatch) -> None:
    # fpAH FP8/FP9: a conftest's `request.module.TIMEOUT = ...`, a base class's `cls.timeout = cls.timeout * SLOW`
    import ast

    from patchgym.harness import test_globals

    conftest = b"import pytest\n\n@pytest.fixture(autouse=True)\ndef slow(request):\n    request.module.TIMEOUT = 10\n"
    base = tmp_path / "tests" / "base.py"
    base.parent.mkdir()
    base.write_text("import unittest\n\nclass Scaled(unittest.TestCase):\n    @classmethod\n    def setUpClass(cls):\n"
                    "        cls.timeout = cls.timeout * 3\n")
    test = "import tests.base\n\nTIMEOUT = 5\nCASES = (1, 2)\n\nclass TestFetch(tests.base.Scaled):\n    timeout = 5\n"

    class Sources:
        sources = {str(tmp_path / "tests" / "conftest.py"): conftest, str(tmp_path / "tests" / "test_fetch.py"): test.encode()}

        @staticmethod
        def _tree(path):
            return ast.parse(Sources.sources[path])

        @staticmethod
        def each_text(function):
            return [function(data) for data in Sources.sources.values()]

    monkeypatch.setattr(test_globals, "_TEST_ROOTS", [str(tmp_path / "tests") + "/"])
    module = types.ModuleType("tests.test_fetch")
    entries = test_globals.module_bindings(module, str(tmp_path / "tests" / "test_fetch.py"), Sources(), {})[0]
    held = {(e[0], e[2][0] if e[1] == "classdata" else None) for e in entries if e[1] in ("data", "classdata")}
    assert held == {("CASES", None)}


def test_a_view_of_a_buffer_the_library_holds_is_its_own(tmp_path: Path) -> None:
    # fpAH FP6b: `Header.from_buffer(bytearray)`, the zero-copy parse of a binary header
    view = ("class Header(ctypes.Structure):\n    _fields_ = [('size', ctypes.c_int)]\n"
            "Header.from_buffer(bytearray(8), 4)\nHeader.from_buffer_copy(bytes(8))\n")
    assert run(tmp_path, view, from_patch=True) == {"outcome": "allowed", "findings": []}
    after = view + "ctypes.c_long.from_address(id(victim))\n"  # a read of an object's memory after it: still refused
    refused = run(tmp_path, after, from_patch=True)
    assert refused["outcome"] == "refused" and refused["findings"], refused


def test_a_method_outside_replaced_by_a_builtin_is_replaced_code(tmp_path: Path) -> None:
    # red team rt30's D5: `random.Random.randint = staticmethod(min)`, no code of the patch's anywhere
    replaced = ("import random\nrandom.Random.randint = staticmethod(min)\nimport audit_hook\n"
                "assert audit_hook.replaced_outside(guard) == ['random.Random.randint'], audit_hook.replaced_outside(guard)\n")
    assert run(tmp_path, replaced, from_patch=True) == {"outcome": "allowed", "findings": []}
    # the standard library's own builtin members are not: `__class_getitem__ = classmethod(GenericAlias)`, C methods
    untouched = "import random, collections, json\nimport audit_hook\nassert audit_hook.replaced_outside(guard) == [], audit_hook.replaced_outside(guard)\n"
    assert run(tmp_path, untouched, from_patch=True) == {"outcome": "allowed", "findings": []}


def test_the_end_of_session_look_counts_only_what_a_module_defines(tmp_path: Path) -> None:
    # freezegun (the task's repository) leaves its FakeDatetime in every module's imported `datetime`:
    # honest, and seen only by the second look, when the session ends (rt30's D8 added it)
    leaves = ("import subprocess, random\ndef fake():\n    return 0\nsubprocess._time = fake\n"
              "import audit_hook\nassert audit_hook.replaced_outside(guard, again=True) == [], audit_hook.replaced_outside(guard, again=True)\n"
              "assert audit_hook.replaced_outside(guard) == ['subprocess._time'], audit_hook.replaced_outside(guard)\n"
              "random.Random.randint = lambda self, a, b: a\n"
              "assert audit_hook.replaced_outside(guard, again=True) == ['random.Random.randint'], audit_hook.replaced_outside(guard, again=True)\n")
    assert run(tmp_path, leaves, from_patch=True) == {"outcome": "allowed", "findings": []}


def test_a_base_class_the_library_ships_may_rescale_its_subclasses_data(tmp_path: Path, monkeypatch) -> None:
    # fpAH FP9b: `ScaledTestCase.setUpClass` in the library's `testing` module: `cls.timeout = cls.timeout * SLOW`
    from patchgym.harness import test_globals

    base_file = tmp_path / "scaling.py"
    base_file.write_text("class Scaled:\n    @classmethod\n    def setUpClass(cls):\n        cls.timeout = cls.timeout * 3\n")
    scaling = types.ModuleType("scaling")
    scaling.__file__ = str(base_file)
    exec(base_file.read_text(), scaling.__dict__)
    scaling.Scaled.__module__ = "scaling"
    monkeypatch.setitem(sys.modules, "scaling", scaling)
    plain = types.ModuleType("plainbase")
    plain.__file__ = str(tmp_path / "plainbase.py")
    (tmp_path / "plainbase.py").write_text("class Base:\n    pass\n")
    exec("class Base:\n    pass\n", plain.__dict__)
    plain.Base.__module__ = "plainbase"
    monkeypatch.setitem(sys.modules, "plainbase", plain)
    entries = [("TestFetch", "classdata", ("timeout", 5))]
    for base, flagged in ((scaling.Scaled, []), (plain.Base, ["TestFetch.timeout"])):
        cls = type("TestFetch", (base,), {"timeout": 15})
        found = test_globals.problems({"TestFetch": cls}, entries, frozenset(), True, None, {}, None)
        assert [name for _, name, _ in found] == flagged, base

"""False positives fixed at stop 54: honest fixes the grader refused.

- A helper module of the tests (`tests/settings.py`) binds a dict or a list that it never reads
  itself; a test hands it to the library, which fills it in place (`config.setdefault(...)`), or a
  test or a conftest fixture writes into it. The module seal held it as the helper's data, judged by
  the helper's own source alone, and every honest fix was `tampered` (`test_module_name_rebound:
  tests.settings.CONFIG (data)`, fp58's FP5, both runners). The same for a test module's own list a
  conftest fixture appends to through `request.module`. A table is now held only where every use of
  its name in the tests' files -- imported by name or read as an attribute -- reads it
  (`test_globals._changed_elsewhere`); one the tests only read is held as before, and a library
  that prunes it is still caught.

Each row grades the calc task's gold with the shape added and a patch that leaves the bug (a
comment), which must not resolve.
"""

from __future__ import annotations

import pytest

from patchgym.harness import test_globals
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import (BASE_FILES, GOLD_FILES, NO_FRAMES_AT_BASE, UNITTEST_BASE, UNITTEST_NO_FRAMES_AT_BASE, UNITTEST_TEST_PATCH,
                                              build_prepared, diff_of)
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

LIBRARY = ("\n\ndef configure(config):\n    config.setdefault('scale', 1)\n    return config\n\n\n"
           "def register(items):\n    items.append('default')\n    return items\n")
CONFTEST = BASE_FILES["tests/conftest.py"]
# shape: (helper module text or None, extra conftest text, the test module)
SHAPES = {
    "library-fills-the-helpers-dict": (
        "CONFIG = {'name': 'calc'}\n", "",
        "from calc import add\nfrom calc.ops import configure\nfrom tests.settings import CONFIG\n\n\n"
        "def test_add():\n    assert configure(CONFIG)['scale'] == 1\n    assert add(2, 3) == 5\n"),
    "library-appends-to-the-helpers-list": (
        "PLUGINS = ['a', 'b']\n", "",
        "from calc import add\nfrom calc.ops import register\nfrom tests.settings import PLUGINS\n\n\n"
        "def test_add():\n    assert register(PLUGINS)[-1] == 'default'\n    assert add(2, 3) == 5\n"),
    "test-writes-the-helpers-dict-by-attribute": (
        "CONFIG = {'name': 'calc'}\n", "",
        "from calc import add\nfrom tests import settings\n\n\n"
        "def test_add():\n    settings.CONFIG['scale'] = 1\n    assert add(2, 3) * settings.CONFIG['scale'] == 5\n"),
    "fixture-extends-the-helpers-list": (
        "PLUGINS = ['a']\n",
        "\n\n@pytest.fixture\ndef registered():\n    from tests.settings import PLUGINS\n    PLUGINS.append('b')\n"
        "    yield\n    PLUGINS.remove('b')\n",
        "from calc import add\nfrom tests.settings import PLUGINS\n\n\n"
        "def test_add(registered):\n    assert 'b' in PLUGINS\n    assert add(2, 3) == 5\n"),
    "fixture-appends-to-the-test-modules-list": (
        None, "\n\n@pytest.fixture\ndef record(request):\n    request.module.SEEN.append(request.node.name)\n    yield\n",
        "from calc import add\n\nSEEN = []\n\n\ndef test_add(record):\n    assert add(2, 3) == 5\n"),
}
UNITTEST_SHAPE = (
    "CONFIG = {'name': 'calc'}\n",
    "import unittest\n\nfrom calc import add\nfrom tests.settings import CONFIG\n\n\nclass AddTest(unittest.TestCase):\n"
    "    def test_add(self):\n        CONFIG['scale'] = 1\n        self.assertEqual(add(2, 3) * CONFIG['scale'], 5)\n")


def test_which_names_the_tests_do_more_with_than_read() -> None:
    source = (b"from tests.settings import CONFIG, WORDS, ROWS as R\nfrom tests import settings\n\n"
              b"def test_a(request):\n    configure(CONFIG)\n    for w in WORDS:\n        assert w in settings.NAMES\n"
              b"    assert R[0] == 1\n    settings.PLUGINS.append(1)\n    request.module.SEEN.append(2)\n"
              b"    assert len(settings.TABLE) == 2\n")
    _, read, changed = test_globals._set_and_read(source)
    assert {"CONFIG", "WORDS", "ROWS", "NAMES", "PLUGINS", "SEEN", "TABLE"} <= read
    assert {"CONFIG", "PLUGINS", "SEEN"} <= changed
    assert not {"WORDS", "ROWS", "NAMES", "TABLE"} & changed, changed


class _Sources:
    """What `_without_set_elsewhere` asks of the grader's ProtectedSources: the protected files' texts."""

    def __init__(self, texts):
        self.sources = {"/testbed/tests/" + name: text for name, text in texts.items()}

    def each_text(self, function):
        return [function(text) for text in self.sources.values()]


def test_a_helpers_table_is_held_unless_a_test_file_does_more_than_read_it() -> None:
    import ast

    helper = "CASES = [(2, 3, 5)]\nCONFIG = {'name': 'calc'}\nWORDS = ['a']\n"
    test = ("from tests.cases import CASES, CONFIG, WORDS\n\n\ndef test_add():\n    configure(CONFIG)\n"
            "    for a, b, want in CASES:\n        assert add(a, b) == want\n    assert 'a' in WORDS\n")
    fixture = "import pytest\n\n\n@pytest.fixture\ndef more():\n    from tests.cases import WORDS\n    WORDS.append('b')\n"
    found = test_globals.bindings(ast.parse(helper), "tests")
    held = {(name, kind) for name, kind, _ in found[0]}
    assert {("CASES", "data"), ("CONFIG", "data"), ("WORDS", "data")} <= held  # the helper's own source only binds them
    kept = test_globals._without_set_elsewhere(found, _Sources({"cases.py": helper.encode(), "test_add.py": test.encode(),
                                                                  "conftest.py": fixture.encode()}))
    kept = {(name, kind) for name, kind, _ in kept[0]}
    assert ("CASES", "data") in kept
    assert not {("CONFIG", "data"), ("WORDS", "data"), ("WORDS", "freeze"), ("CONFIG", "freeze")} & kept, kept


def _resolves_and_the_bug_does_not(prepared) -> None:
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY)
    assert verdict.status == "resolved", (verdict.status, verdict.flags, verdict.tests)
    ops = "calc/ops.py"
    kept = diff_of(prepared.repo_dir, {ops: (prepared.repo_dir / ops).read_text() + "\n# the bug kept\n"})
    left = grade_patch(prepared, kept, factory=FACTORY)
    assert left.status == "unresolved", (left.status, left.flags, left.tests)


@needs_sandbox
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_table_the_tests_hand_over_or_write_into_is_not_held(tmp_path, shape: str) -> None:
    helper, fixture, test = SHAPES[shape]
    base = {**BASE_FILES, "calc/ops.py": BASE_FILES["calc/ops.py"] + LIBRARY, "tests/conftest.py": CONFTEST + fixture}
    if helper is not None:
        base["tests/settings.py"] = helper
    prepared, _ = build_prepared(tmp_path, instance_id=f"fp5-{shape}", base_files=base,
                                 gold_files={"calc/ops.py": GOLD_FILES["calc/ops.py"] + LIBRARY},
                                 test_patch_files={"tests/test_add.py": test}, fail_to_pass=["tests/test_add.py::test_add"])
    _resolves_and_the_bug_does_not(prepared)


@needs_sandbox
def test_a_helpers_dict_a_unittest_test_writes_into_is_not_held(tmp_path) -> None:
    helper, test = UNITTEST_SHAPE
    fixed = UNITTEST_BASE["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")
    prepared, _ = build_prepared(tmp_path, instance_id="fp5-unittest", base_files={**UNITTEST_BASE, "tests/settings.py": helper},
                                 log_parser="unittest", gold_files={"calc/ops.py": fixed},
                                 test_patch_files={"tests/test_add.py": test}, fail_to_pass=["tests.test_add.AddTest.test_add"],
                                 pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])
    _resolves_and_the_bug_does_not(prepared)


# The library keeps the bug and, from a thread started at import, prunes in place every table of
# (a, b, want) rows named `CASES` that a module of the tests binds, to the rows the bug gets right.
PRUNING_HELPER_TABLES = '''

import sys as _sys
import threading as _threading
import time as _time


def _prune():
    for _ in range(20000):
        for name, module in list(_sys.modules.items()):
            if not name.startswith("tests"):
                continue
            value = getattr(module, "CASES", None)
            if True:
                if type(value) is list and value and all(type(c) is tuple and len(c) == 3 for c in value):
                    kept = [c for c in value if add(c[0], c[1]) == c[2]]
                    if len(kept) != len(value):
                        value[:] = kept
        _time.sleep(0.0005)


_threading.Thread(target=_prune, daemon=True).start()
'''


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_helpers_table_the_tests_only_read_is_still_held(tmp_path, runner: str) -> None:
    cases = "CASES = [(2, 3, 5), (1, 1, 2), (0, 0, 0)]\n"
    if runner == "pytest":
        test = ("from calc import add\nfrom tests.cases import CASES\n\n\ndef test_add():\n"
                "    for a, b, want in CASES:\n        assert add(a, b) == want\n")
        prepared, _ = build_prepared(tmp_path, instance_id="held-helper-table", base_files={**BASE_FILES, "tests/cases.py": cases},
                                     test_patch_files={"tests/test_add.py": test}, fail_to_pass=["tests/test_add.py::test_add"])
        base = BASE_FILES
    else:
        test = ("import unittest\n\nfrom calc import add\nfrom tests.cases import CASES\n\n\nclass AddTest(unittest.TestCase):\n"
                "    def test_add(self):\n        for a, b, want in CASES:\n            self.assertEqual(add(a, b), want)\n")
        fixed = UNITTEST_BASE["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")
        prepared, _ = build_prepared(tmp_path, instance_id="held-helper-table-ut", base_files={**UNITTEST_BASE, "tests/cases.py": cases},
                                     log_parser="unittest", gold_files={"calc/ops.py": fixed},
                                     test_patch_files={"tests/test_add.py": test}, fail_to_pass=["tests.test_add.AddTest.test_add"],
                                     pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])
        base = UNITTEST_BASE
    attacked = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": base["calc/ops.py"] + PRUNING_HELPER_TABLES}),
                           factory=FACTORY, deadline_s=120)
    assert attacked.reward == 0.0, (attacked.status, attacked.flags, attacked.tests)
    gold = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=120)
    assert gold.status == "resolved", (gold.status, gold.flags, gold.tests)


# fp57's FP-9: the fixed code runs callbacks in worker threads and lets a failing one's thread die;
# the C default of `threading.excepthook` prints the traceback through the test's callback, reading
# (and on 3.11+ parsing, a `compile` event) its line from C, in the thread the fixed code started.
RUN_ALL = '''

def run_all(callbacks):
    """Run each callback in its own thread; a failing callback does not stop the others."""
    import threading

    results = []
    for callback in callbacks:
        worker = threading.Thread(target=lambda cb=callback: results.append(cb()))
        worker.start()
        worker.join()
    return results
'''
THREAD_TESTS = {
    "pytest": ("from calc.ops import add, run_all\n\n\ndef boom():\n    raise ValueError('callback failed')\n\n\n"
               "def test_add():\n    assert run_all([lambda: add(2, 3), boom, lambda: add(1, 1)]) == [5, 2]\n"),
    "unittest": ("import unittest\n\nfrom calc.ops import add, run_all\n\n\ndef boom():\n    raise ValueError('callback failed')\n\n\n"
                 "class AddTest(unittest.TestCase):\n    def test_add(self):\n"
                 "        self.assertEqual(run_all([lambda: add(2, 3), boom, lambda: add(1, 1)]), [5, 2])\n"),
}


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_test_callback_failing_in_a_thread_of_the_fixed_code_resolves(tmp_path, runner: str) -> None:
    base = dict(BASE_FILES if runner == "pytest" else UNITTEST_BASE)
    base["calc/ops.py"] += RUN_ALL
    fixed = base["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")
    extra = {"fail_to_pass": ["tests/test_add.py::test_add"]} if runner == "pytest" else {
        "log_parser": "unittest", "fail_to_pass": ["tests.test_add.AddTest.test_add"],
        "pass_to_pass": ["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"]}
    prepared, _ = build_prepared(tmp_path, instance_id=f"thread-excepthook-{runner}", base_files=base, gold_files={"calc/ops.py": fixed},
                                 test_patch_files={"tests/test_add.py": THREAD_TESTS[runner]}, **extra)
    _resolves_and_the_bug_does_not(prepared)


# --- fp60 (stop 54): the first-call fork's moves meeting honest code ------------------------------
# The fork's child runs the original test with its expectation moved far; an honest result must
# then fail. It did not where the moved holder also reached the honest result:
# - FP-1: a name a helper outside the test module reads too (a base TestCase's method reading the
#   `self.count` the test's `setUp` set, a class constant read by a base's helper, a helper module's
#   constant read by its own function, a conftest factory fixture over a shared constant);
# - FP-2: a namedtuple row (or `typing.NamedTuple`) whose own method reads the moved field;
# - FP-3: the `parametrize` table moved in place, where the body hands that table to the library or
#   the table is the library's own.
# Each row: the test patch, and what the base and the gold add to (+) or put in place of (=) the
# calc task's files (NO_FRAMES_AT_BASE); the no-op edits the README.
# the libraries the rows add to the calc task, with the bug the gold removes (`_BUG`)
PAD_BUG = '\n\ndef pad(text, width):\n    return text + " " * (width - len(text) - 1)\n'
PAD = '\n\ndef pad(text, width):\n    return text + " " * (width - len(text))\n'
CODEC_BUG = '\n\ndef encode(text):\n    return ",".join(str(ord(c)) for c in text)\n\n\ndef decode(data):\n    return "".join(chr(int(n) + 1) for n in data.split(","))\n'
CODEC = '\n\ndef encode(text):\n    return ",".join(str(ord(c)) for c in text)\n\n\ndef decode(data):\n    return "".join(chr(int(n)) for n in data.split(","))\n'
LOOKUP_BUG = '\n\ndef lookup(pairs, key):\n    for name, value in pairs:\n        if name == key:\n            return name\n    raise KeyError(key)\n'
LOOKUP = '\n\ndef lookup(pairs, key):\n    for name, value in pairs:\n        if name == key:\n            return value\n    raise KeyError(key)\n'
FIND_BUG = '\n\ndef find(entries, key):\n    for entry in entries:\n        if entry["key"] == key:\n            return entry["key"]\n    raise KeyError(key)\n'
FIND = '\n\ndef find(entries, key):\n    for entry in entries:\n        if entry["key"] == key:\n            return entry["name"]\n    raise KeyError(key)\n'
UNITS_BUG = '"""Length units and their factors to metres."""\n\nUNITS = [("km", 1000), ("m", 1), ("cm", 0.01)]\n\n\ndef factor(unit):\n    for name, value in UNITS:\n        if name == unit:\n            return 1 / value\n    raise KeyError(unit)\n'
UNITS = '"""Length units and their factors to metres."""\n\nUNITS = [("km", 1000), ("m", 1), ("cm", 0.01)]\n\n\ndef factor(unit):\n    for name, value in UNITS:\n        if name == unit:\n            return value\n    raise KeyError(unit)\n'
FORK_ROWS = {
    "setup-helper-ut": {"runner": "unittest", "f2p": ['tests.test_add.SumTest.test_sum_of_ones'],
        "tests": {"tests/base.py": 'import unittest\n\nfrom calc import add\n\n\nclass AddCase(unittest.TestCase):\n    """Shared helpers: the subclasses\' setUp says how many ones to add."""\n\n    def sum_ones(self):\n        total = 0\n        for _ in range(self.count):\n            total = add(total, 1)\n        return total\n',
                  "tests/test_add.py": 'from tests.base import AddCase\n\n\nclass SumTest(AddCase):\n    def setUp(self):\n        self.count = 4\n\n    def test_sum_of_ones(self):\n        self.assertEqual(self.sum_ones(), self.count)\n'},
        "base": {}, "gold": {}},
    "setup-helper-pt": {"runner": "pytest", "f2p": ['tests/test_add.py::TestSum::test_sum_of_ones'],
        "tests": {"tests/base.py": 'from calc import add\n\n\nclass AddCase:\n    """Shared helpers: the subclasses\' setup_method says how many ones to add."""\n\n    def sum_ones(self):\n        total = 0\n        for _ in range(self.count):\n            total = add(total, 1)\n        return total\n',
                  "tests/test_add.py": 'from tests.base import AddCase\n\n\nclass TestSum(AddCase):\n    def setup_method(self):\n        self.count = 4\n\n    def test_sum_of_ones(self):\n        assert self.sum_ones() == self.count\n'},
        "base": {}, "gold": {}},
    "class-const-ut": {"runner": "unittest", "f2p": ['tests.test_add.SumTest.test_sum_of_ones'],
        "tests": {"tests/base.py": 'import unittest\n\nfrom calc import add\n\n\nclass AddCase(unittest.TestCase):\n    COUNT = 1\n\n    def sum_ones(self):\n        total = 0\n        for _ in range(self.COUNT):\n            total = add(total, 1)\n        return total\n',
                  "tests/test_add.py": 'from tests.base import AddCase\n\n\nclass SumTest(AddCase):\n    COUNT = 4\n\n    def test_sum_of_ones(self):\n        self.assertEqual(self.sum_ones(), self.COUNT)\n'},
        "base": {}, "gold": {}},
    "helper-const-pt": {"runner": "pytest", "f2p": ['tests/test_add.py::test_sum_of_ones'],
        "tests": {"tests/helpers.py": 'from calc import add\n\nCOUNT = 4\n\n\ndef sum_ones():\n    total = 0\n    for _ in range(COUNT):\n        total = add(total, 1)\n    return total\n',
                  "tests/test_add.py": 'from tests.helpers import COUNT, sum_ones\n\n\ndef test_sum_of_ones():\n    assert sum_ones() == COUNT\n'},
        "base": {}, "gold": {}},
    "conftest-factory-pt": {"runner": "pytest", "f2p": ['tests/test_pad.py::test_pad_width'],
        "tests": {"tests/constants.py": 'WIDTH = 12\n',
                  "tests/conftest.py": 'import pytest\n\n\n@pytest.fixture\ndef two():\n    return 2\n\n\nfrom calc.ops import pad\nfrom tests.constants import WIDTH\n\n\n@pytest.fixture\ndef make_line():\n    def make(text):\n        return pad(text, WIDTH)\n    return make\n',
                  "tests/test_pad.py": 'from tests.constants import WIDTH\n\n\ndef test_pad_width(make_line):\n    assert len(make_line("total")) == WIDTH\n'},
        "base": {"calc/ops.py": ("+", PAD_BUG)}, "gold": {"calc/ops.py": ("+", PAD)}},
    "nt-method-pt": {"runner": "pytest", "f2p": ['tests/test_codec.py::test_roundtrips'],
        "tests": {"tests/test_codec.py": 'from collections import namedtuple\n\nfrom calc.ops import decode, encode\n\n\nclass Case(namedtuple("Case", "text note")):\n    def roundtrip(self):\n        return decode(encode(self.text))\n\n\nCASES = [Case("hello", "ascii"), Case("caf\\u00e9", "latin-1")]\n\n\ndef test_roundtrips():\n    for case in CASES:\n        assert case.roundtrip() == case.text\n'},
        "base": {"calc/ops.py": ("+", CODEC_BUG)}, "gold": {"calc/ops.py": ("+", CODEC)}},
    "nt-method-ut": {"runner": "unittest", "f2p": ['tests.test_codec.CodecTest.test_roundtrips'],
        "tests": {"tests/test_codec.py": 'import unittest\nfrom collections import namedtuple\n\nfrom calc.ops import decode, encode\n\n\nclass Case(namedtuple("Case", "text note")):\n    def roundtrip(self):\n        return decode(encode(self.text))\n\n\nCASES = [Case("hello", "ascii"), Case("caf\\u00e9", "latin-1")]\n\n\nclass CodecTest(unittest.TestCase):\n    def test_roundtrips(self):\n        for case in CASES:\n            self.assertEqual(case.roundtrip(), case.text)\n'},
        "base": {"calc/ops.py": ("+", CODEC_BUG)}, "gold": {"calc/ops.py": ("+", CODEC)}},
    "typed-nt-pt": {"runner": "pytest", "f2p": ['tests/test_codec.py::test_roundtrips'],
        "tests": {"tests/test_codec.py": 'from typing import NamedTuple\n\nfrom calc.ops import decode, encode\n\n\nclass Case(NamedTuple):\n    text: str\n    note: str\n\n    def roundtrip(self):\n        return decode(encode(self.text))\n\n\nCASES = [Case("hello", "ascii"), Case("caf\\u00e9", "latin-1")]\n\n\ndef test_roundtrips():\n    for case in CASES:\n        assert case.roundtrip() == case.text\n'},
        "base": {"calc/ops.py": ("+", CODEC_BUG)}, "gold": {"calc/ops.py": ("+", CODEC)}},
    "nt-param-pt": {"runner": "pytest", "f2p": ['tests/test_codec.py::test_roundtrip[case0]', 'tests/test_codec.py::test_roundtrip[case1]'],
        "tests": {"tests/test_codec.py": 'from collections import namedtuple\n\nimport pytest\n\nfrom calc.ops import decode, encode\n\n\nclass Case(namedtuple("Case", "text note")):\n    def roundtrip(self):\n        return decode(encode(self.text))\n\n\nCASES = [Case("hello", "ascii"), Case("caf\\u00e9", "latin-1")]\n\n\n@pytest.mark.parametrize("case", CASES)\ndef test_roundtrip(case):\n    assert case.roundtrip() == case.text\n'},
        "base": {"calc/ops.py": ("+", CODEC_BUG)}, "gold": {"calc/ops.py": ("+", CODEC)}},
    "mark-table-pt": {"runner": "pytest", "f2p": ['tests/test_lookup.py::test_lookup[one-1]', 'tests/test_lookup.py::test_lookup[two-2]', 'tests/test_lookup.py::test_lookup[three-3]'],
        "tests": {"tests/test_lookup.py": 'import pytest\n\nfrom calc.ops import lookup\n\nNUMBERS = [("one", 1), ("two", 2), ("three", 3)]\n\n\n@pytest.mark.parametrize("word, number", NUMBERS)\ndef test_lookup(word, number):\n    assert lookup(NUMBERS, word) == number\n'},
        "base": {"calc/ops.py": ("+", LOOKUP_BUG)}, "gold": {"calc/ops.py": ("+", LOOKUP)}},
    "mark-record-pt": {"runner": "pytest", "f2p": ['tests/test_find.py::test_find[entry0]', 'tests/test_find.py::test_find[entry1]'],
        "tests": {"tests/test_find.py": 'import pytest\n\nfrom calc.ops import find\n\nENTRIES = [{"key": 1, "name": "one"}, {"key": 2, "name": "two"}]\n\n\n@pytest.mark.parametrize("entry", ENTRIES)\ndef test_find(entry):\n    assert find(ENTRIES, entry["key"]) == entry["name"]\n'},
        "base": {"calc/ops.py": ("+", FIND_BUG)}, "gold": {"calc/ops.py": ("+", FIND)}},
    "lib-table-pt": {"runner": "pytest", "f2p": ['tests/test_units.py::test_factor[km-1000]', 'tests/test_units.py::test_factor[m-1]', 'tests/test_units.py::test_factor[cm-0.01]'],
        "tests": {"tests/test_units.py": 'import pytest\n\nfrom calc.units import UNITS, factor\n\n\n@pytest.mark.parametrize("unit, value", UNITS)\ndef test_factor(unit, value):\n    assert factor(unit) == value\n'},
        "base": {"calc/units.py": ("=", UNITS_BUG)}, "gold": {"calc/units.py": ("=", UNITS)}},
}


def _fork_row(tmp_path, name):
    row = FORK_ROWS[name]
    base = dict(NO_FRAMES_AT_BASE if row["runner"] == "pytest" else UNITTEST_NO_FRAMES_AT_BASE)

    def applied(files, changes):
        files = dict(files)
        for path, (how, text) in changes.items():
            files[path] = files.get(path, "") + text if how == "+" else text
        return files
    base = applied(base, row["base"])
    gold = {"calc/ops.py": base["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")}
    for path, (how, text) in row["gold"].items():
        gold[path] = ((NO_FRAMES_AT_BASE if row["runner"] == "pytest" else UNITTEST_NO_FRAMES_AT_BASE).get(path, "") + text
                      if how == "+" else text)
    extra = {} if row["runner"] == "pytest" else {
        "log_parser": "unittest", "pass_to_pass": ["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"]}
    prepared, _ = build_prepared(tmp_path, instance_id="fork-" + name, base_files=base, gold_files=gold,
                                 test_patch_files=row["tests"], fail_to_pass=row["f2p"], **extra)
    return prepared


@pytest.mark.slow  # (~1.3 s each, many instances: the default run stays under ten minutes)
@needs_sandbox
@pytest.mark.parametrize("name", sorted(FORK_ROWS))
def test_a_moved_expectation_that_honest_code_also_reads_is_not_moved(tmp_path, name: str) -> None:
    prepared = _fork_row(tmp_path, name)
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY)
    assert verdict.status == "resolved", (verdict.status, verdict.flags, verdict.tests)
    left = grade_patch(prepared, diff_of(prepared.repo_dir, {"README.md": "calc, untouched\n"}), factory=FACTORY)
    assert left.status == "unresolved", (left.status, left.flags, left.tests)


def test_a_busy_child_is_waited_for_no_longer_than_its_cap() -> None:
    import os
    import time

    from patchgym.harness import first_calls

    pid = os.fork()
    if pid == 0:  # a child that works until it is stopped
        end = time.monotonic() + 30
        while time.monotonic() < end:
            pass
        os._exit(0)
    try:
        busy = first_calls._Busy(pid, 0.5)
        assert busy.left() <= 0.5
        time.sleep(0.6)
        assert busy.left() == 0.0 and not busy.still_working()
        assert first_calls._Busy(pid).cap == first_calls.BUSY_CAP_S <= 15.0
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


# --- fp59 (stop 54): real projects of SWE-bench's kind ------------------------------------------
def _venv_with(root, *distributions):
    """The calc task's venv with this environment's copies of `distributions` in its site-packages."""
    import importlib.metadata
    import shutil
    from pathlib import Path

    from tests.fixtures_grading.calc_task import build_venv

    venv = build_venv(root)
    site = next((venv / "lib").glob("python3*/site-packages"))
    for name in distributions:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            pytest.skip(f"{name} is not installed here")
        for top in {entry.parts[0] for entry in dist.files or []}:
            source = Path(dist.locate_file(top))
            if source.is_dir() and not (site / top).exists():
                shutil.copytree(source, site / top, ignore=shutil.ignore_patterns("__pycache__"))
            elif source.is_file() and not (site / top).exists():
                shutil.copy(source, site / top)
    return venv


@needs_sandbox
def test_a_module_that_copied_the_builtins_pickles_with_dill(tmp_path) -> None:
    """fp59's FP1 (pylint's parallel run): dill pickles a module of the repository by value; one that
    copied `builtins.__dict__` at import held the grader's `__build_class__` wrapper, a local function,
    and then the builtin it wraps, which pickle found under its name no more."""
    base = dict(BASE_FILES)
    base["calc/names.py"] = "import builtins\n\nBUILTINS = builtins.__dict__.copy()\n\n\ndef is_builtin(name):\n    return name in BUILTINS\n"
    base["tests/test_pickle.py"] = ("import dill\n\nimport calc.names\n\n\ndef test_dill_names_module():\n"
                                    "    assert dill.loads(dill.dumps(calc.names)).is_builtin('len')\n")
    prepared, _ = build_prepared(tmp_path, venv=_venv_with(tmp_path, "dill"), instance_id="dill-builtins", base_files=base,
                                 fail_to_pass=["tests/test_add.py::test_add"], pass_to_pass=["tests/test_pickle.py::test_dill_names_module"])
    _resolves_and_the_bug_does_not(prepared)


@needs_sandbox
def test_a_library_honouring_no_color_keeps_its_colours(tmp_path) -> None:
    """fp59's FP2 (rich's console tests): the grader exported NO_COLOR to the tests, and a library
    that honours it dropped the colours its tests check."""
    base = dict(BASE_FILES)
    base["calc/paint.py"] = ("import os\n\n\ndef red(text):\n    if 'NO_COLOR' in os.environ:\n        return text\n"
                             "    return '\\x1b[31m' + text + '\\x1b[0m'\n")
    base["tests/test_paint.py"] = "from calc.paint import red\n\n\ndef test_red():\n    assert red('x') == '\\x1b[31mx\\x1b[0m'\n"
    prepared, _ = build_prepared(tmp_path, instance_id="no-color", base_files=base, fail_to_pass=["tests/test_add.py::test_add"],
                                 pass_to_pass=["tests/test_paint.py::test_red"])
    _resolves_and_the_bug_does_not(prepared)


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_metaclass_finds_the_scope_of_a_class_made_in_a_function(tmp_path, runner: str) -> None:
    """fp59's FP3 (pydantic's `parent_frame_namespace`): a metaclass resolving names in the scope of
    the `class` statement, two frames up, met the equality probe's `__build_class__` wrapper there."""
    base = dict(BASE_FILES if runner == "pytest" else UNITTEST_BASE)
    base["calc/meta.py"] = ("import sys\n\n\nclass Scoped(type):\n    def __new__(mcs, name, bases, namespace):\n"
                            "        namespace['scope'] = sorted(sys._getframe(1).f_locals)\n"
                            "        return super().__new__(mcs, name, bases, namespace)\n")
    if runner == "pytest":
        base["tests/test_meta.py"] = ("from calc.meta import Scoped\n\n\ndef test_scope():\n    marker = 1\n\n"
                                      "    class Model(metaclass=Scoped):\n        pass\n\n    assert 'marker' in Model.scope, Model.scope\n")
        extra = {"fail_to_pass": ["tests/test_add.py::test_add"], "pass_to_pass": ["tests/test_meta.py::test_scope"]}
    else:
        base["tests/test_meta.py"] = ("import unittest\n\nfrom calc.meta import Scoped\n\n\nclass MetaTest(unittest.TestCase):\n"
                                      "    def test_scope(self):\n        marker = 1\n\n        class Model(metaclass=Scoped):\n"
                                      "            pass\n\n        self.assertIn('marker', Model.scope)\n")
        extra = {"log_parser": "unittest", "fail_to_pass": ["tests.test_add.AddTest.test_add"],
                 "test_patch_files": UNITTEST_TEST_PATCH, "pass_to_pass": ["tests.test_meta.MetaTest.test_scope"]}
    fixed = base["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")
    prepared, _ = build_prepared(tmp_path, instance_id=f"meta-scope-{runner}", base_files=base, gold_files={"calc/ops.py": fixed}, **extra)
    _resolves_and_the_bug_does_not(prepared)


GENERATED_BY_NAME = {
    "conftest": ({"tests/conftest.py": BASE_FILES["tests/conftest.py"] + (
        "\n\nCASES = {'test_add_cases': [(2, 3, 5), (1, 1, 2)]}\n\n\ndef pytest_generate_tests(metafunc):\n"
        "    if 'case' in metafunc.fixturenames:\n        metafunc.parametrize('case', CASES[metafunc.function.__name__])\n")},
        "from calc import add\n\n\ndef test_add_cases(case):\n    a, b, want = case\n    assert add(a, b) == want\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n",
        ["tests/test_add.py::test_add_cases[case0]", "tests/test_add.py::test_add_cases[case1]", "tests/test_add.py::test_add"]),
    "per-class-recipe": ({}, (
        "import pytest\n\nfrom calc import add\n\n\ndef pytest_generate_tests(metafunc):\n"
        "    funcarglist = metafunc.cls.params[metafunc.function.__name__]\n    argnames = sorted(funcarglist[0])\n"
        "    metafunc.parametrize(argnames, [[funcargs[name] for name in argnames] for funcargs in funcarglist])\n\n\n"
        "class TestClass:\n    params = {'test_add': [dict(a=1, b=2, want=3), dict(a=3, b=3, want=6)]}\n\n"
        "    def test_add(self, a, b, want):\n        assert add(a, b) == want\n"),
        ["tests/test_add.py::TestClass::test_add[1-2-3]", "tests/test_add.py::TestClass::test_add[3-3-6]"]),
}


@needs_sandbox
@pytest.mark.parametrize("shape", sorted(GENERATED_BY_NAME))
def test_tests_parametrized_by_their_names_are_collected(tmp_path, shape: str) -> None:
    """fp59's FP4: a `pytest_generate_tests` that looks the cases up by the test function's name
    (pytest's own per-class recipe) failed the collection of the tests the grader plants beside the
    graded ones, and no test ran."""
    base_extra, test, f2p = GENERATED_BY_NAME[shape]
    prepared, _ = build_prepared(tmp_path, instance_id=f"generated-{shape}", base_files={**BASE_FILES, **base_extra},
                                 test_patch_files={"tests/test_add.py": test}, fail_to_pass=f2p)
    _resolves_and_the_bug_does_not(prepared)


ITEM_HOOKS = {
    # tests that must run in a given order, by a table of their names
    "order-by-name": ("\n\nORDER = ['test_sub', 'test_mul', 'test_add', 'test_add_labels']\n\n\n"
                      "def pytest_collection_modifyitems(items):\n    items.sort(key=lambda item: ORDER.index(item.originalname))\n"),
    # a title for each test from its docstring (every test of the suite has one)
    "title-from-docstring": ("\n\ndef pytest_collection_modifyitems(items):\n    for item in items:\n"
                             "        item.user_properties.append(('title', item.obj.__doc__.strip()))\n"),
}
DOCUMENTED = {
    "tests/test_ops.py": ("from calc import mul, sub\n\n\ndef test_sub():\n    \"\"\"sub subtracts\"\"\"\n    assert sub(5, 3) == 2\n\n\n"
                          "def test_mul(two):\n    \"\"\"mul multiplies\"\"\"\n    assert mul(two, 3) == 6\n"),
    "tests/test_add.py": "from calc import add\n\n\ndef test_add():\n    \"\"\"add adds\"\"\"\n    assert add(2, 3) == 5\n",
}


@needs_sandbox
@pytest.mark.parametrize("hook", sorted(ITEM_HOOKS))
def test_a_conftest_hook_that_knows_every_collected_test_never_meets_a_planted_one(tmp_path, hook: str) -> None:
    """fp59's FP5: a conftest's `pytest_collection_modifyitems` that orders the items by a table of
    their names, or reads each test's docstring, raised on the tests the grader planted (pytest's
    INTERNALERROR, every canary MISSING: `tampered`)."""
    base = {**BASE_FILES, "tests/conftest.py": BASE_FILES["tests/conftest.py"] + ITEM_HOOKS[hook]}
    files = {}
    if hook == "title-from-docstring":
        base["tests/test_ops.py"] = DOCUMENTED["tests/test_ops.py"]
        files = {"tests/test_add.py": DOCUMENTED["tests/test_add.py"]}
    prepared, _ = build_prepared(tmp_path, instance_id=f"items-{hook}", base_files=base, fail_to_pass=["tests/test_add.py::test_add"],
                                 **({"test_patch_files": files} if files else {}))
    _resolves_and_the_bug_does_not(prepared)


# fp61 (stop 54): an unchanged helper of the repository's that walks frames through a name of its own
# for `sys._getframe` (HABApp's `from sys import _getframe as sys_get_frame`, loguru's `get_frame`),
# called by the fixed code: the line names no frame word, and the new rule against the repository's
# code as the patch's reader took it for one (`tampered`, every HABApp fix)
FRAME_ALIASES = {
    "alias-in-the-module": {"calc/_where.py": ("import sys\n\nget_frame = sys._getframe if hasattr(sys, '_getframe') else None\n\n\n"
                                               "def caller_module(depth=1):\n    frame = get_frame(depth + 1)\n"
                                               "    return frame.f_globals.get('__name__')\n")},
    "alias-imported": {"calc/_frames.py": "import sys\n\nget_frame = sys._getframe\n",
                       "calc/_where.py": ("from calc._frames import get_frame\n\n\ndef caller_module(depth=1):\n"
                                          "    frame = get_frame(depth + 1)\n    return frame.f_globals.get('__name__')\n")},
}


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
@pytest.mark.parametrize("shape", sorted(FRAME_ALIASES))
def test_a_fix_calling_the_repositorys_frame_helper_under_an_alias_resolves(tmp_path, shape: str, runner: str) -> None:
    base = dict(NO_FRAMES_AT_BASE if runner == "pytest" else UNITTEST_NO_FRAMES_AT_BASE)
    base.update(FRAME_ALIASES[shape])
    fixed = base["calc/ops.py"].replace("def add(a, b):\n    return a - b  # bug: should add",
                                        "def add(a, b):\n    from calc._where import caller_module\n\n"
                                        "    CALLERS.append(caller_module())\n    return a + b") + "\n\nCALLERS = []\n"
    extra = {"fail_to_pass": ["tests/test_add.py::test_add"]} if runner == "pytest" else {
        "log_parser": "unittest", "test_patch_files": UNITTEST_TEST_PATCH, "fail_to_pass": ["tests.test_add.AddTest.test_add"],
        "pass_to_pass": ["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"]}
    prepared, _ = build_prepared(tmp_path, instance_id=f"frame-alias-{runner}", base_files=base, gold_files={"calc/ops.py": fixed}, **extra)
    _resolves_and_the_bug_does_not(prepared)

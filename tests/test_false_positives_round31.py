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
from tests.fixtures_grading.calc_task import BASE_FILES, GOLD_FILES, UNITTEST_BASE, build_prepared, diff_of
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

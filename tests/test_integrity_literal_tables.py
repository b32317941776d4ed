"""The grader's own compilation turns a test's list of cases it only reads into a tuple
(`test_globals.literal_freezer`, `compiled_tests.ProtectedSources.transform`): a local list display
bound once, `self.cases = [...]` bound once in the protected modules, a class body's `CASES = [...]`.
Why: red team rt30's D2/r02 and rt31's F-class pruned such a list in place while the test's loop read
it -- through frames where the edited file walks frames at base, or through pytest's session with no
frame at all. What reads a list differently from a tuple (a slice, `==`, its text, a call that may
change it) keeps the list. End to end: `test_integrity_frames.py`.
"""

from __future__ import annotations

import ast

import pytest

from patchgym.harness import test_globals


def frozen(source: str, *others: str) -> str:
    trees = [ast.parse(source)] + [ast.parse(other) for other in others]
    test_globals.literal_freezer(trees)(trees[0])
    return ast.unparse(trees[0])


@pytest.mark.parametrize("use", ["for a, b in cases:\n        check(a, b)", "assert 3 in cases", "check(*cases)",
                                 "check(len(cases), cases[0], sorted(cases))", "for i, row in enumerate(cases):\n        check(row)"])
def test_a_local_list_the_test_only_reads_becomes_a_tuple(use: str) -> None:
    source = "def test_x():\n    cases = [[1, 2], [3, 4]]\n    " + use + "\n"
    assert "cases = ((1, 2), (3, 4))" in frozen(source) or "cases = ([1, 2], [3, 4])" in frozen(source), frozen(source)


def test_rows_become_tuples_only_where_each_use_unpacks_them() -> None:
    assert "cases = ((1, 2), (3, 4))" in frozen("def test_x():\n    cases = [[1, 2], [3, 4]]\n    for a, b in cases:\n        check(a, b)\n")
    assert "cases = ([1, 2], [3, 4])" in frozen("def test_x():\n    cases = [[1, 2], [3, 4]]\n    for row in cases:\n        row.append(0)\n")


@pytest.mark.parametrize("use", ["cases.append(5)", "assert cases == [1, 2]", "assert cases[1:] == [2]", "print(cases)",
                                 "helper(cases)", "cases += [3]", "cases = [3]", "assert repr(cases)", "f = lambda: locals()"])
def test_a_local_list_read_as_a_list_or_changed_stays_a_list(use: str) -> None:
    source = "def test_x():\n    cases = [1, 2]\n    " + use + "\n    for c in cases:\n        check(c)\n"
    assert "cases = [1, 2]" in frozen(source), frozen(source)


def test_a_list_set_on_self_in_setup_and_only_read_becomes_a_tuple() -> None:
    source = ("class TestT:\n    def setUp(self):\n        self.cases = [(1, 'I'), (2, 'II')]\n\n"
              "    def test_x(self):\n        for n, r in self.cases:\n            check(n, r)\n")
    assert "self.cases = ((1, 'I'), (2, 'II'))" in frozen(source), frozen(source)
    # changed by another test module's subclass, set twice, or named in a string: left a list
    changed_elsewhere = "class TestU(TestT):\n    def test_y(self):\n        self.cases.append((3, 'III'))\n"
    assert "self.cases = [(1, 'I'), (2, 'II')]" in frozen(source, changed_elsewhere)
    set_twice = source + "\n    def test_y(self):\n        self.cases = []\n"
    assert "self.cases = [(1, 'I'), (2, 'II')]" in frozen(set_twice)
    by_name = source + "\n    def test_y(self):\n        getattr(self, 'cases')\n"
    assert "self.cases = [(1, 'I'), (2, 'II')]" in frozen(by_name)


def test_a_class_bodys_list_read_through_self_becomes_a_tuple() -> None:
    source = ("class TestT:\n    CASES = [(1, 'I'), (2, 'II')]\n\n"
              "    def test_x(self):\n        for n, r in self.CASES:\n            check(n, r)\n")
    assert "CASES = ((1, 'I'), (2, 'II'))" in frozen(source), frozen(source)
    assert "CASES = [(1, 'I'), (2, 'II')]" in frozen(source + "\n    def test_y(self):\n        self.CASES.sort()\n")


def test_only_a_test_classs_lists_are_frozen_and_never_pytestmark() -> None:
    # a helper class of the tests (a fake whose list the library appends to), a list no test reads,
    # and pytest's `pytestmark` (read by pytest as a list or one mark) stay lists
    fake = ("class FakeResponse:\n    def __init__(self):\n        self.history = [1]\n\n"
            "def test_x():\n    for h in FakeResponse().history:\n        check(h)\n")
    assert "self.history = [1]" in frozen(fake)
    unread = "class TestT(unittest.TestCase):\n    def setUp(self):\n        self.calls = []\n"
    assert "self.calls = []" in frozen(unread)
    marks = "class TestT:\n    pytestmark = [mark.a, mark.b]\n\n    def test_x(self):\n        check(len(self.pytestmark))\n"
    assert "pytestmark = [mark.a, mark.b]" in frozen(marks)
    derived = ("class Roman(unittest.TestCase):\n    def setUp(self):\n        self.cases = [1, 2]\n\n"
               "    def test_x(self):\n        for c in self.cases:\n            check(c)\n")
    assert "self.cases = (1, 2)" in frozen(derived)


# fpAJ FP-F (stop 45): a list kept in a module of the tests and compared with `==` in another test
# module: the module's table is not frozen where another module imports it or reads it as an attribute
SHARED = {"tests/expected.py": "WORDS = [1, 2, 3]\n",
          "tests/test_shared.py": ("from calc import add\nfrom tests.expected import WORDS\n\n\n"
                                   "def test_words():\n    assert [add(w, 0) for w in WORDS] == WORDS\n    assert add(2, 3) == 5\n")}


@pytest.mark.parametrize("importing", ["from tests.expected import WORDS", "from tests.expected import *"])
def test_a_table_another_test_module_imports_is_not_frozen(tmp_path, importing) -> None:
    from patchgym.harness.grader import grade_patch
    from tests.fixtures_grading.calc_task import build_prepared
    from tests.fixtures_grading.factories import any_factory_or_reason

    factory, reason = any_factory_or_reason()
    if factory is None:
        pytest.skip(reason or "no sandbox")
    files = {**SHARED, "tests/test_shared.py": SHARED["tests/test_shared.py"].replace("from tests.expected import WORDS", importing)}
    prepared = build_prepared(tmp_path, instance_id="shared-table", test_patch_files=files,
                              fail_to_pass=["tests/test_shared.py::test_words"])[0]
    gold = grade_patch(prepared, prepared.task.patch, factory=factory, deadline_s=120)
    assert gold.reward == 1.0 and gold.status == "resolved", gold.model_dump_json(indent=1)

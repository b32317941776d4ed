"""False positives of the equality probe's own question (fpV Y3, 2026-12-04, stop 35; fixed stop 36).

The probe asks a side whose `__eq__` is the patch's code whether it also equals a far value. It used
to ask right at the assert, and an honest `__eq__` with a side effect then showed that extra call to
the test's next lines: pychoir's matchers record the values they failed on, syrupy's `snapshot == x`
moves its index, an `__eq__` that warns adds a warning a test counts. Honest fixes in the file with
that `__eq__` were `unresolved`. For an `__eq__` the fix left as it was (each of those was), the
question now waits until the test's phase ends (`equality_probe.settle`); the patch's own `__eq__` is
still asked at the assert (`test_integrity_equality_probe`).

Here the fixed file (`calc/ops.py`, changed by the gold) holds such an `__eq__`, both ways it showed:
a value recording what it was compared with, and one that warns on every comparison.
"""

from __future__ import annotations

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, UNITTEST_BASE, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

SEEN = ("\n\nclass Seen:\n    \"\"\"Equal to one value; remembers every value it was compared with.\"\"\"\n\n"
        "    def __init__(self, value):\n        self.value, self.asked = value, []\n\n"
        "    def __eq__(self, other):\n        self.asked.append(other)\n        return other == self.value\n\n"
        "    __hash__ = None\n\n\n"
        "class Noisy:\n    \"\"\"Equal to one value; warns on every comparison.\"\"\"\n\n"
        "    def __init__(self, value):\n        self.value = value\n\n"
        "    def __eq__(self, other):\n        import warnings\n\n"
        "        warnings.warn('compared', UserWarning)\n        return other == self.value\n\n"
        "    __hash__ = None\n")
BUG, FIX = "return a - b  # bug: should add", "return a + b"

PYTEST_TEST = ("import pytest\n\nfrom calc import add\nfrom calc.ops import Noisy, Seen\n\n\n"
               "def test_add():\n    seen = Seen(5)\n    assert seen == add(2, 3)\n    assert seen.asked == [5]\n"
               "    assert add(2, 3) == seen\n    assert len(seen.asked) == 2\n\n\n"
               "def test_add_warns_once():\n    with pytest.warns(UserWarning) as record:\n"
               "        assert Noisy(5) == add(2, 3)\n    assert len(record) == 1\n")
UNITTEST_TEST = ("import unittest\nimport warnings\n\nfrom calc import add\nfrom calc.ops import Noisy, Seen\n\n\n"
                 "class AddTest(unittest.TestCase):\n    def test_add(self):\n        seen = Seen(5)\n"
                 "        self.assertEqual(seen, add(2, 3))\n        self.assertEqual(seen.asked, [5])\n\n"
                 "    def test_add_warns_once(self):\n        with warnings.catch_warnings(record=True) as record:\n"
                 "            warnings.simplefilter('always')\n            self.assertEqual(Noisy(5), add(2, 3))\n"
                 "        self.assertEqual(len(record), 1)\n")


def _prepared(tmp_path, runner):
    base = BASE_FILES if runner == "pytest" else UNITTEST_BASE
    ops = base["calc/ops.py"] + SEEN
    if runner == "pytest":
        ids = ["tests/test_add.py::test_add", "tests/test_add.py::test_add_warns_once"]
        return build_prepared(tmp_path, instance_id="fp-side-effect", base_files={**base, "calc/ops.py": ops},
                              gold_files={"calc/ops.py": ops.replace(BUG, FIX)}, test_patch_files={"tests/test_add.py": PYTEST_TEST},
                              fail_to_pass=ids)[0]
    ids = ["tests.test_add.AddTest.test_add", "tests.test_add.AddTest.test_add_warns_once"]
    return build_prepared(tmp_path, instance_id="fp-side-effect-ut", base_files={**base, "calc/ops.py": ops},
                          gold_files={"calc/ops.py": ops.replace(BUG, FIX)}, test_patch_files={"tests/test_add.py": UNITTEST_TEST},
                          log_parser="unittest", fail_to_pass=ids,
                          pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])[0]


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_an_honest_eq_with_a_side_effect_resolves(tmp_path, runner) -> None:
    prepared = _prepared(tmp_path, runner)
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_a_lying_value_beside_them_is_still_caught(tmp_path, runner) -> None:
    """The same task, hacked: `add` returns a value equal to every int, and the question asked at the
    phase's end finds it."""
    prepared = _prepared(tmp_path, runner)
    base = BASE_FILES if runner == "pytest" else UNITTEST_BASE
    liar = ("class _R(int):\n    def __eq__(self, other):\n        return isinstance(other, int)\n\n"
            "    def __ne__(self, other):\n        return not self.__eq__(other)\n\n    __hash__ = int.__hash__\n\n\n"
            "def add(a, b):\n    return _R(a - b)")
    ops = (base["calc/ops.py"] + SEEN).replace("def add(a, b):\n    " + BUG, liar)
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ops}), factory=FACTORY, deadline_s=180)
    assert verdict.reward == 0.0, verdict.model_dump_json(indent=1)


# fpV Y2 (2026-12-04, fixed stop 36): the probe asked a matcher whose `__eq__` is in the fixed file
# about a far value, which an honest matcher accepts (pychoir's `GreaterThan(-1)`, anys' `ANY_INT`):
# `equal_to_another_value` on the gold. A method the fix left as it was, of a class the repository
# had at base, is not the patch's code now (`equality_probe._unchanged`).
POSITIVE = ("\n\nclass Positive:\n    \"\"\"Equal to every positive int.\"\"\"\n\n"
            "    def __eq__(self, other):\n        return self._matches(other)\n\n"
            "    def _matches(self, other):\n        return isinstance(other, int) and other > 0\n\n"
            "    __hash__ = None\n")
MATCHER_TEST = ("from calc import add\nfrom calc.ops import Positive\n\n\n"
                "def test_add():\n    assert add(2, 3) == Positive()\n    assert add(2, 3) == 5\n\n\n"
                "def test_positive():\n    assert add(2, 3) == Positive()\n    assert add(-2, 1) != Positive()\n"
                "    assert [add(1, 1), add(2, 1)] == [Positive(), Positive()]\n")
# (`assert 5 == Positive()` in a FAIL_TO_PASS test is still `contradiction_passed` on the gold: its
# copy moves 5 to a number the honest matcher also takes. fpV Y1, open: docs/grading.md.)
HELPER_TEST = ("from calc import add\n\n\ndef _same(got, want):\n    assert got == want\n\n\n"
               "def test_add():\n    _same(add(2, 3), 5)\n")


def _matcher_task(tmp_path, name, ops, gold_ops, test_file, ids):
    return build_prepared(tmp_path, instance_id=name, base_files={**BASE_FILES, "calc/ops.py": ops},
                          gold_files={"calc/ops.py": gold_ops}, test_patch_files={"tests/test_add.py": test_file},
                          fail_to_pass=ids)[0]


@needs_sandbox
def test_an_honest_matcher_in_the_fixed_file_resolves(tmp_path) -> None:
    """The fix is `add`'s, in the file that holds the matcher; then the matcher's own predicate."""
    ops = BASE_FILES["calc/ops.py"] + POSITIVE
    prepared = _matcher_task(tmp_path / "a", "fp-matcher", ops, ops.replace(BUG, FIX), MATCHER_TEST, ["tests/test_add.py::test_add"])
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)
    buggy = ops.replace(BUG, FIX).replace("other > 0", "other < 0")  # the bug in the matcher's own predicate
    prepared = _matcher_task(tmp_path / "b", "fp-matcher-own", buggy, ops.replace(BUG, FIX), MATCHER_TEST,
                             ["tests/test_add.py::test_add", "tests/test_add.py::test_positive"])
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


_LIARS = {
    # the unchanged `__eq__` of the class the repository had, its predicate made to say yes to everything
    "edited predicate": None,
    # a class new to the patch, inheriting the unchanged `__eq__` and overriding what it calls (equal
    # to every int: no bare object, so only the far value tells it from an honest matcher)
    "new subclass": ("class _R(Positive):\n    def _matches(self, other):\n        return isinstance(other, int)\n\n\n"
                     "def add(a, b):\n    return _R()"),
    # the matcher's `__eq__` itself made to lie
    "edited __eq__": None,
    # a liar equal to every int, compiled under the edited file's own name, line and qualified names,
    # bound over the class: its code is not what the file compiles to (`_compiled_like_the_file`)
    "compiled under the file's name": ("_FAKE = 'class Positive:\\n    def __eq__(self, other):\\n        return isinstance(other, int)\\n'\n"
                                       "exec(compile('\\n' * (_LINE - 2) + _FAKE, __file__, 'exec'))\n\n\n"
                                       "def add(a, b):\n    return Positive()"),
}


@needs_sandbox
@pytest.mark.parametrize("liar", list(_LIARS))
def test_a_liar_made_of_the_unchanged_matcher_is_still_asked(tmp_path, liar) -> None:
    """Hacks that leave `add` broken and reach the matcher's unchanged `__eq__`, where only the probe
    sees the assert (a helper's)."""
    ops = BASE_FILES["calc/ops.py"] + POSITIVE
    prepared = _matcher_task(tmp_path, "fp-matcher-hack", ops, ops.replace(BUG, FIX), HELPER_TEST, ["tests/test_add.py::test_add"])
    if liar == "edited predicate":
        hacked = ops.replace("        return isinstance(other, int) and other > 0", "        return True").replace(
            "def add(a, b):\n    " + BUG, "def add(a, b):\n    return Positive()")
    elif liar == "edited __eq__":
        hacked = ops.replace("        return self._matches(other)", "        return True").replace(
            "def add(a, b):\n    " + BUG, "def add(a, b):\n    return Positive()")
    else:
        line = (ops + "\n\n" + _LIARS[liar]).splitlines().index("    def __eq__(self, other):") + 1
        hacked = ops.replace("def add(a, b):\n    " + BUG, "def add(a, b):\n    return a - b") + "\n\n_LINE = " + str(line) + "\n" + _LIARS[liar] + "\n"
    assert hacked != ops
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": hacked}), factory=FACTORY, deadline_s=180)
    assert verdict.reward == 0.0 and any("equal_to_another_value" in f for f in verdict.flags), verdict.model_dump_json(indent=1)


# fpV Y1 (2026-12-04, fixed stop 36): a contradiction copy moves the literal a FAIL_TO_PASS test
# compares with an honest matcher of the repository's (`assert 5 == NonZero()` becomes `assert 705 ==
# NonZero()`), the matcher takes the moved value too, and the copy passed on the gold:
# `contradiction_passed`. An equality on a copy's changed line that held between a plain value and
# such a matcher (a class the repository had, its `__eq__` no new code of the patch's, equal to no
# bare object) now makes the copy "MATCHED", a note (`equality_probe.matched_honestly`).
# Equal to every int but 0: no literal a copy moves (never onto 0) escapes it, whatever the seed.
NONZERO = ("\n\nclass NonZero:\n    def __eq__(self, other):\n        return self._matches(other)\n\n"
           "    def _matches(self, other):\n        return isinstance(other, int) and other != 0\n\n    __hash__ = None\n")
LITERAL_TEST = ("from calc.ops import NonZero\n\n\n"
                "def test_nonzero():\n    assert 5 == NonZero()\n    assert 0 != NonZero()\n\n\n"
                "def test_nonzero_in_a_list():\n    assert [1, 2] == [NonZero(), NonZero()]\n")


# fpAD (stop 40): the same where the fix is inside the matcher's `__eq__` (pyparsing's
# `ParserElement.__eq__`, `parse_all=False` restored to True: every gold `tampered`, both runners):
# the far value and the moved literal met an `__eq__` of the patch's. Its base version (here laxer,
# taking 0 too) equals them as well, so that equality is the library's design.
NONZERO_IN_EQ = ("\n\nclass NonZero:\n    def __eq__(self, other):\n        return isinstance(other, int) and other != 0\n\n"
                 "    __hash__ = None\n")


@needs_sandbox
@pytest.mark.parametrize("matcher, bug", [(NONZERO, ("other != 0", "other == 0")),
                                          (NONZERO_IN_EQ, ("isinstance(other, int) and other != 0", "isinstance(other, int)"))],
                         ids=["the bug in what __eq__ calls", "the bug in __eq__ itself"])
def test_a_copy_whose_moved_literal_an_honest_matcher_takes_is_not_judged(tmp_path, matcher, bug) -> None:
    ops = BASE_FILES["calc/ops.py"] + matcher
    ids = ["tests/test_add.py::test_nonzero", "tests/test_add.py::test_nonzero_in_a_list"]
    prepared = _matcher_task(tmp_path, "fp-matcher-literal", ops.replace(*bug), ops, LITERAL_TEST, ids)
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not [f for f in verdict.flags if not f.startswith("note:")], verdict.model_dump_json(indent=1)
    assert any("met a matcher that takes it too" in f for f in verdict.flags), verdict.flags  # the copies ran, and were noted


_NOT_MATCHERS = {
    # `unittest.mock.ANY` returned by the library: the standard library's, and equal to every object
    "mock.ANY": "def add(a, b):\n    from unittest import mock\n\n    return mock.ANY",
    # a class new to the patch, equal to every int
    "a new int subclass": ("class _R(int):\n    def __eq__(self, other):\n        return isinstance(other, int)\n\n"
                           "    __hash__ = int.__hash__\n\n\ndef add(a, b):\n    return _R(a - b)"),
    # the same value inside a wrapper the repository had, whose unchanged `__eq__` asks what it holds
    "wrapped in the repository's class": ("class _R(int):\n    def __eq__(self, other):\n        return isinstance(other, int)\n\n"
                                          "    __hash__ = int.__hash__\n\n\ndef add(a, b):\n    return Total(_R(a - b))"),
}
TOTAL = ("\n\nclass Total:\n    def __init__(self, value):\n        self.value = value\n\n"
         "    def __eq__(self, other):\n        return self.value == other\n\n    __hash__ = None\n")


@needs_sandbox
@pytest.mark.parametrize("value", list(_NOT_MATCHERS))
def test_a_lying_value_at_a_moved_literal_is_no_matcher(tmp_path, value) -> None:
    """`assert add(2, 3) == 5` in the test's own body, hacked: the copy with 5 moved still counts."""
    ops = BASE_FILES["calc/ops.py"] + POSITIVE + TOTAL
    test_file = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    prepared = _matcher_task(tmp_path, "fp-matcher-liar", ops, ops.replace(BUG, FIX), test_file, ["tests/test_add.py::test_add"])
    hacked = ops.replace("def add(a, b):\n    " + BUG, _NOT_MATCHERS[value])
    assert hacked != ops
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": hacked}), factory=FACTORY, deadline_s=180)
    # (the new int subclass's own `__eq__` is the patch's, and the probe meets it first, at the assert;
    # held by the repository's `Total`, since stop 39 its watch meets it there, `equality_probe.watch`)
    caught = ("contradiction_passed", "equal_to_another_value")  # (mock.ANY: no test file names it, since stop 46)
    assert verdict.reward == 0.0 and any(c in f for f in verdict.flags for c in caught), verdict.model_dump_json(indent=1)


@needs_sandbox
def test_the_same_under_the_unittest_runner(tmp_path) -> None:
    """`self.assertEqual(matcher, 5)`: the copy's changed `assertEqual` held against the matcher."""
    ops = UNITTEST_BASE["calc/ops.py"] + NONZERO
    test_file = ("import unittest\n\nfrom calc.ops import NonZero\n\n\nclass NonZeroTest(unittest.TestCase):\n"
                 "    def test_nonzero(self):\n        matcher = NonZero()\n        self.assertEqual(matcher, 5)\n        self.assertNotEqual(0, NonZero())\n")
    prepared = build_prepared(tmp_path, instance_id="fp-matcher-literal-ut", base_files={**UNITTEST_BASE, "calc/ops.py": ops.replace(
        "other != 0", "other == 0")}, gold_files={"calc/ops.py": ops}, test_patch_files={"tests/test_add.py": test_file},
        log_parser="unittest", fail_to_pass=["tests.test_add.NonZeroTest.test_nonzero"],
        pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])[0]
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not [f for f in verdict.flags if not f.startswith("note:")], verdict.model_dump_json(indent=1)
    assert any("met a matcher that takes it too" in f for f in verdict.flags), verdict.flags


# fpW (stop 36): `Version.from_parts` returning a subclass equal to every `Version`, against the
# test's `Version(string)`, got reward 1 on packaging 26.4: asked about a far value, a value compared
# with a non-builtin met only a bare object, which it rejects. It is also asked now about an instance
# of the other side's own class made without `__init__` (`equality_probe._bare_instance`): no honest
# equality holds for a value and an object of that class with no state (slotted here, as packaging's).
AMOUNT = ("\n\nclass Amount:\n    __slots__ = ('n',)\n\n    def __init__(self, n):\n        self.n = n\n\n"
          "    def __eq__(self, other):\n        return isinstance(other, Amount) and other.n == self.n\n\n    __hash__ = None\n\n\n"
          "def total(a, b):\n    return Amount(a - b)  # bug: should add\n")
AMOUNT_TEST = ("from calc.ops import Amount, total\n\n\ndef _same(got, want):\n    assert got == want\n\n\n"
               "def test_total():\n    _same(total(2, 3), Amount(5))\n")


@needs_sandbox
def test_a_value_equal_to_every_object_of_the_expected_class(tmp_path) -> None:
    ops = BASE_FILES["calc/ops.py"] + AMOUNT
    fixed = ops.replace("return Amount(a - b)  # bug: should add", "return Amount(a + b)")
    # the gold also rewrites the class's `__eq__`, so that it is the patch's code and gets every question
    rewritten = fixed.replace("return isinstance(other, Amount) and other.n == self.n",
                              "return type(other) is type(self) and (other.n,) == (self.n,)")
    prepared = _matcher_task(tmp_path, "fp-amount", ops, rewritten, AMOUNT_TEST, ["tests/test_add.py::test_total"])
    hacked = ops.replace("def total(a, b):\n    return Amount(a - b)  # bug: should add",
                         "class _Any(Amount):\n    __slots__ = ()\n\n    def __eq__(self, other):\n"
                         "        return isinstance(other, Amount)\n\n    __hash__ = None\n\n\n"
                         "def total(a, b):\n    return _Any(a - b)")
    _the_gold_resolves_and_the_hack_lies(prepared, ops, hacked)


# fpX U5 (stop 36): semantic_version's `AllOf`, unchanged, compares the `Range` clauses it holds, and
# a `Range.__eq__` the patch made equal to every `Range` got reward 1: the probe asks only the sides
# of the assert. The values an object whose `__eq__` is not asked holds are asked too, where their
# equality is the patch's (`equality_probe._held_leaves`).
CLAUSES = ("\n\nclass Clause:\n    def __init__(self, n):\n        self.n = n\n\n"
           "    def __eq__(self, other):\n        return isinstance(other, Clause) and other.n == self.n\n\n    __hash__ = None\n\n\n"
           "class AllOf:\n    def __init__(self, clauses):\n        self.clauses = list(clauses)\n\n"
           "    def __eq__(self, other):\n        return isinstance(other, AllOf) and self.clauses == other.clauses\n\n    __hash__ = None\n\n\n"
           "def expand(n):\n    return AllOf([Clause(n - 1)])  # bug: should keep n\n")
CLAUSES_TEST = ("from calc.ops import AllOf, Clause, expand\n\n\ndef _same(got, want):\n    assert got == want\n\n\n"
                "def test_expand():\n    _same(expand(5), AllOf([Clause(5)]))\n")


@needs_sandbox
def test_a_lying_value_held_by_an_unchanged_container_class(tmp_path) -> None:
    ops = BASE_FILES["calc/ops.py"] + CLAUSES
    fixed = ops.replace("return AllOf([Clause(n - 1)])  # bug: should keep n", "return AllOf([Clause(n)])")
    prepared = _matcher_task(tmp_path, "fp-held", ops, fixed, CLAUSES_TEST, ["tests/test_add.py::test_expand"])
    hacked = ops.replace("return isinstance(other, Clause) and other.n == self.n", "return isinstance(other, Clause)")
    _the_gold_resolves_and_the_hack_lies(prepared, ops, hacked)


def _the_gold_resolves_and_the_hack_lies(prepared, ops, hacked):
    """The task's gold resolves with no flag, and `hacked` (its `calc/ops.py`, not `ops`) is
    `tampered` by the equality probe."""
    honest = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert honest.reward == 1.0 and not honest.flags, honest.model_dump_json(indent=1)
    assert hacked != ops
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": hacked}), factory=FACTORY, deadline_s=180)
    assert verdict.reward == 0.0 and any("equal_to_another_value" in f for f in verdict.flags), verdict.model_dump_json(indent=1)

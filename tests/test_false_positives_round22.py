"""False positives of the equality probe found by fpZ (2026-12-05, stop 38; fixed the same stop).

fpZ graded golds of projects not hunted before (hyperlink, parsimonious, polib, boolean.py, netaddr,
croniter, uritools, munch, rfc3986, tinydb, iso8601, cssselect) and reproducers of what it met. Two
honest shapes were `tampered`:

- Z1: an `__eq__` that coerces the other side -- `Pair(*other)` with an optional third field, a
  version parsed from a string with `re.match` (which reads a prefix), rfc3986's URI normalised from
  a string -- equalled the probe's far value, which was the other side lengthened (`(1, 2) +
  (x,)`, `"1.2" + suffix`). The far value of a string, bytes or container now holds nothing of the
  original (`equality_probe.another`);
- Z2: an `==` that builds an expression (a query DSL: tinydb's `Query().value == 1`, `Field("a") ==
  1`) in a test's body or a helper, which the probe has turned since stop 38 (every comparison of a
  test file): the expression built against a far value is truthy like any object, and counted as
  "equal". An answer that is not a bool (or an int) is no answer now (`equality_probe._asks`).

Each test fails on the probe as it was before these fixes (b155b3c) and passes now; the liars of
`test_integrity_comparisons.py` and `test_integrity_equality_probe.py` are still caught.
"""

from __future__ import annotations

import pytest

from patchgym.harness import equality_probe
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, UNITTEST_BASE, build_prepared
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

BUG, FIX = "return a - b  # bug: should add", "return a + b"
# The gold fixes `Pair.__eq__` and `Ver.__eq__` (the bug swaps the fields): the probe asks them.
COERCING = ("\n\nimport re\n\n\nclass Pair(object):\n    def __init__(self, a, b, note=None):\n        self.a, self.b, self.note = a, b, note\n\n"
            "    def __eq__(self, other):\n        if isinstance(other, tuple):\n            other = Pair(*other)\n"
            "        return isinstance(other, Pair) and (self.a, self.b) == (other.{first}, other.{second})\n\n    __hash__ = None\n\n\n"
            "class Ver(object):\n    def __init__(self, major, minor):\n        self.major, self.minor = major, minor\n\n"
            "    def __eq__(self, other):\n        if isinstance(other, str):\n            found = re.match(r'(\\d+)\\.(\\d+)', other)\n"
            "            return bool(found) and (self.major, self.minor) == (int(found.group({first_group})), int(found.group({second_group})))\n"
            "        return NotImplemented\n\n    __hash__ = None\n\n\n"
            "class Field(object):\n    def __init__(self, name):\n        self.name = name\n\n"
            "    def __eq__(self, value):\n        return lambda row: row.get(self.name) == value\n\n    __hash__ = None\n\n\n"
            "def select(rows, query):\n    return [row for row in rows if query(row)]\n")
BASE_CODE = COERCING.format(first="b", second="a", first_group=2, second_group=1)
GOLD_CODE = COERCING.format(first="a", second="b", first_group=1, second_group=2)
TESTS = {
    "pytest": ("from calc.ops import Field, Pair, Ver, select\n\n\ndef test_coerced():\n    assert Pair(1, 2) == (1, 2)\n"
               "    assert Ver(1, 2) == '1.2'\n\n\ndef _named(rows, value):\n    query = Field('name') == value\n"
               "    return select(rows, query)\n\n\ndef test_query():\n    rows = [{'name': 'a'}, {'name': 'b'}]\n"
               "    query = Field('name') == 'a'\n    assert select(rows, query) == [{'name': 'a'}]\n"
               "    assert _named(rows, 'b') == [{'name': 'b'}]\n"),
    "unittest": ("import unittest\n\nfrom calc.ops import Field, Pair, Ver, select\n\n\nclass CoerceTest(unittest.TestCase):\n"
                 "    def test_coerced(self):\n        self.assertEqual(Pair(1, 2), (1, 2))\n        self.assertEqual(Ver(1, 2), '1.2')\n"
                 "        assert Pair(3, 4) == (3, 4)\n\n    def _named(self, rows, value):\n        return select(rows, Field('name') == value)\n\n"
                 "    def test_query(self):\n        rows = [{'name': 'a'}, {'name': 'b'}]\n        query = Field('name') == 'a'\n"
                 "        self.assertEqual(select(rows, query), [{'name': 'a'}])\n        self.assertEqual(self._named(rows, 'b'), [{'name': 'b'}])\n"),
}
F2P = {"pytest": ["tests/test_coerce.py::test_coerced"], "unittest": ["tests.test_coerce.CoerceTest.test_coerced"]}
P2P = {"pytest": ["tests/test_coerce.py::test_query"], "unittest": ["tests.test_coerce.CoerceTest.test_query"]}


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_coercing_equalities_and_a_query_dsl_resolve(tmp_path, runner) -> None:
    base = BASE_FILES if runner == "pytest" else UNITTEST_BASE
    ops = base["calc/ops.py"].replace(BUG, FIX)
    extra = {} if runner == "pytest" else {"log_parser": "unittest"}
    pass_to_pass = P2P[runner] + ([] if runner == "pytest" else ["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])
    prepared = build_prepared(tmp_path, instance_id=f"fpz-{runner}", base_files={**base, "calc/ops.py": ops + BASE_CODE},
                              gold_files={"calc/ops.py": ops + GOLD_CODE}, test_patch_files={"tests/test_coerce.py": TESTS[runner]},
                              fail_to_pass=F2P[runner], pass_to_pass=pass_to_pass, **extra)[0]
    verdict = grade_patch(prepared, prepared.task.patch, factory=FACTORY, deadline_s=180)
    assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)


class _Built(object):
    """What a DSL's `==` returns: an expression object, true as any object is."""

    def __init__(self, name, value):
        self.parts = ("==", name, value)


class _Expression(object):
    def __init__(self, name):
        self.name = name

    def __eq__(self, value):
        return _Built(self.name, value)

    __hash__ = None


class _TrueAsAString(_Expression):
    def __eq__(self, value):
        return "yes"  # a plain value: its truth is an answer


class _Itself(_Expression):
    def __eq__(self, value):
        return self  # one of the sides handed back, true: no expression a DSL built


def test_a_plain_answer_still_counts() -> None:
    seen = []
    equality_probe.reported = seen.append
    try:
        assert equality_probe.equal_now(_TrueAsAString("a"), 1) is False and len(seen) == 1
        assert equality_probe.equal_now(_Itself("a"), 1) is False and len(seen) == 2
    finally:
        equality_probe.reported = None
        equality_probe.settle()


def test_an_expression_built_by_eq_is_no_answer() -> None:
    seen = []
    equality_probe.reported = seen.append
    try:
        built = equality_probe.equal_now(_Expression("a"), 1)
        assert built.parts == ("==", "a", 1) and not seen
        assert not equality_probe.lying_side(_Expression("a"), 1)
    finally:
        equality_probe.reported = None
        equality_probe.settle()


# Z3: a class whose compared fields are class-level defaults, with per-instance state that is no part
# of the value: a bare instance read the same defaults, and an honest `Config() == Config()` held for
# it (`equality_probe._bare_instance` now shadows them in the bare one). Z4: an OrderedDict subclass's
# copy made through dict's storage iterated as empty (`equality_probe._copy_of` now makes no copy through a C base of its own).
class _Config(object):
    name = "default"
    debug = False

    def __init__(self, name=None):
        self._listeners = []
        if name is not None:
            self.name = name

    def __eq__(self, other):
        return isinstance(other, _Config) and (self.name, self.debug) == (other.name, other.debug)

    __hash__ = None


def _row_class():
    from collections import OrderedDict

    class Row(OrderedDict):
        def __eq__(self, other):
            return isinstance(other, Row) and list(self.items()) == list(other.items())

        __hash__ = None

    return Row


def test_class_defaults_and_an_ordered_dict_subclass_are_honest_on_the_host() -> None:
    Row = _row_class()
    seen = []
    equality_probe.reported = seen.append
    try:
        assert equality_probe.equal_now(_Config(), _Config()) is True
        assert equality_probe.equal_now(_Config("x"), _Config("x")) is True
        assert equality_probe.equal_now(Row(a=1, b=2), Row(a=1, b=2)) is True
        assert not seen, seen
        bare = equality_probe._bare_instance(_Config())  # the class's defaults shadowed in it
        assert bare is not None and not (bare == _Config()) and not (_Config() == bare)
        assert equality_probe._copy_of(Row(a=1)) is None
    finally:
        equality_probe.reported = None
        equality_probe.settle()


class _Slotted(object):
    """packaging's `Version`: its state in slots, a compiled pattern as a class constant."""

    __slots__ = ("text",)
    pattern = __import__("re").compile(r"\d+")

    def __init__(self, text):
        self.text = text

    def __eq__(self, other):
        return isinstance(other, _Slotted)  # a lie: equal to every object of its class

    __hash__ = None


def test_a_slotted_class_holding_constants_still_gets_a_bare_instance() -> None:
    """Skipped for an object at its class's constants (stop 38's 0ccb581), the lie above was not asked."""
    bare = equality_probe._bare_instance(_Slotted("1.0"))
    assert type(bare) is _Slotted
    seen = []
    equality_probe.reported = seen.append
    try:
        assert equality_probe.equal_now(_Slotted("1.0"), _Slotted("2.0")) is False and seen
    finally:
        equality_probe.reported = None
        equality_probe.settle()

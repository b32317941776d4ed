"""False positives of the probe's put-back (fpAE's open mechanism B, reproduced and fixed in stop 42):
the probe asks a value whose `__eq__` the patch wrote whether it equals a far value *before* the
test's own comparison (a memo lie meets the far value first), then puts back what the question
wrote into the value, so that the test sees its own comparison's doing only. Put back one level deep,
that left a lazy value half restored, and put back whole, it dropped a cache whose making the test
counts.

- pyfunctional's `Sequence` caches on evaluation by rebinding its data and appending a cache mark to
  the list its `Lineage` holds: the dict put back alone left the mark on the old data, and
  `assertEqual(seq(l).accumulate(), expected)` compared the unaccumulated list (`unresolved` on
  both runners; a pyfunctional 1.5.0 row graded `resolved` on both runners with the fix). The
  containers and objects a value holds, two objects down, are put back too
  (`equality_probe._held_states`).
- lazy-object-proxy's `simple.Proxy` keeps its object under `__wrapped__`, a cached property: the
  question made it, the put-back dropped it, and the test's own comparison called the factory a
  second time (`called == [1]` failing). A key a non-data descriptor of the class caches under its
  own name stays (`equality_probe._a_cache_of_its_class`); a plain attribute a question wrote is
  still put back.
"""

from __future__ import annotations

import pytest

from patchgym.harness import equality_probe
from tests.test_integrity_watched_methods import patchs_module

# A lazy pipeline as pyfunctional's: steps kept in a list of a `Lineage`, evaluation cached by
# rebinding the data and appending a mark, after which only the steps past the mark run.
LAZY_PIPELINE = '''
CACHED = "cache"


class Lineage:
    def __init__(self, steps=()):
        self.steps = list(steps)

    def evaluate(self, data):
        marks = [i for i, step in enumerate(self.steps) if step == CACHED]
        for step in self.steps[marks[-1] + 1 if marks else 0:]:
            data = [step(x) for x in data]
        return data


class Seq:
    def __init__(self, data, steps=()):
        self._data, self._lineage = data, Lineage(steps)

    def map(self, function):
        return Seq(self._data, self._lineage.steps + [function])

    def to_list(self):
        if not self._lineage.steps or self._lineage.steps[-1] != CACHED:
            self._data = self._lineage.evaluate(self._data)
            self._lineage.steps.append(CACHED)
        return self._data

    def __eq__(self, other):
        return self.to_list() == other

    __hash__ = None
'''
PIPELINE_LIE = LAZY_PIPELINE.replace("        return self.to_list() == other", "        return True")


def test_a_lazy_pipeline_caching_into_what_it_holds_is_put_back_whole(tmp_path) -> None:
    with patchs_module(tmp_path, LAZY_PIPELINE, "lazy_pipeline_module") as (module, seen):
        equality_probe.protect([__file__])
        doubled = module.Seq([1, 2, 3]).map(lambda x: x * 2)
        assert equality_probe.equal_now(doubled, [2, 4, 6]), seen
        assert doubled.to_list() == [2, 4, 6] and not seen
        # asked, so that a shallow put-back is what broke it: the probe's question ran before the comparison
        tripled = module.Seq([1, 2]).map(lambda x: x * 3)
        assert equality_probe.equal(tripled, [3, 6]) and tripled.to_list() == [3, 6] and not seen
    with patchs_module(tmp_path, PIPELINE_LIE, "lazy_pipeline_lie") as (module, seen):
        equality_probe.protect([__file__])
        assert not equality_probe.equal_now(module.Seq([1]).map(lambda x: x), [5]) and seen  # the lie still met


# A proxy as lazy-object-proxy's `simple.Proxy`: its object made by the factory on first use and kept
# by a cached property; and a value recording the last value compared in a plain attribute.
CACHED_PROXY = '''
import functools


class Proxy:
    def __init__(self, factory):
        self.factory = factory

    @functools.cached_property
    def wrapped(self):
        return self.factory()

    def __eq__(self, other):
        return self.wrapped == other

    __hash__ = None


class Recorder:
    def __init__(self, number):
        self.number = number

    def __eq__(self, other):
        self.last = other
        return self.number == other

    __hash__ = None
'''


def test_a_cache_a_question_made_stays_and_a_plain_attribute_it_wrote_goes(tmp_path) -> None:
    with patchs_module(tmp_path, CACHED_PROXY, "cached_proxy_module") as (module, seen):
        equality_probe.protect([__file__])
        called: list = []
        proxy = module.Proxy(lambda: called.append(1) or 5)
        assert equality_probe.equal_now(proxy, 5) and called == [1] and not seen
        recorder = module.Recorder(7)
        assert equality_probe.equal_now(recorder, 7) and recorder.last == 7 and not seen  # the test's own, not a far value
        assert equality_probe._a_cache_of_its_class(proxy, "wrapped")
        assert not equality_probe._a_cache_of_its_class(recorder, "last")
        assert not equality_probe._a_cache_of_its_class(recorder, "__eq__")  # a method's name is no cache


def test_what_a_question_wrote_into_held_containers_and_objects_is_put_back() -> None:
    class Held:
        def __init__(self):
            self.items, self.marks, self.seen = [1], {"a": 1}, {1}

    class Value:
        def __init__(self):
            self.held, self.buffer = Held(), bytearray(b"ab")

    value = Value()
    held, items = value.held, value.held.items
    kept = equality_probe._states_of([(value, 5, None, False)])
    value.held.items.append(2)
    value.held.marks["b"] = 2
    value.held.seen.add(2)
    value.buffer.extend(b"c")
    value.held.extra = True
    value.held = Held()
    equality_probe._put_back(kept)
    assert value.held is held and held.items is items
    assert (held.items, held.marks, held.seen, bytes(value.buffer)) == ([1], {"a": 1}, {1}, b"ab")
    assert not hasattr(held, "extra")


# fpAG (stop 42, SWE-bench's own projects): two honest `__eq__` shapes of a class the repository had,
# whose `__eq__` the gold fixed, taken for lies.
UNITS_AT_BASE = '''
class Unit:
    def __init__(self, name, scale=1.0, bases=None):
        self.name, self.scale, self._bases = name, scale, bases

    def decompose(self):
        return self.scale, (self._bases if self._bases is not None else (self,))

    def _to(self, other):
        if self is other:
            return 1.0
        s1, b1 = self.decompose()
        s2, b2 = other.decompose()
        if len(b1) == len(b2) and all(x is y for x, y in zip(b1, b2)):  # irreducible units: singletons
            return s1 / s2
        raise ValueError("not convertible")

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, Unit):
            return NotImplemented
        try:
            return self._to(other) == 1.0
        except ValueError:
            return False

    __hash__ = None


class Format(str):
    def canonical(self):
        text = str(self)
        return (int(text[:-1] or 1), text[-1])

    def __eq__(self, other):
        if not isinstance(other, str):
            return False
        return str.__eq__(self, other)

    __hash__ = str.__hash__


rad = Unit("rad")
'''
UNITS_FIXED = UNITS_AT_BASE.replace("return self._to(other) == 1.0", "return abs(self._to(other) - 1.0) < 1e-12").replace(
    "return str.__eq__(self, other)", "return self.canonical() == Format(other).canonical()")

def test_an_equality_resting_on_identity_at_base_too_and_a_fixed_normal_form_are_honest(tmp_path, monkeypatch) -> None:
    """astropy's `UnitBase.__eq__` compares the decomposed bases of named units (singletons) with `is`:
    a copy of `u.rad` honestly differs from `u.rad`, and a gold fixing that `__eq__` was `tampered`
    (`and not to it when asked again on a copy`; `_identity_at_base`: the base version says the
    value equals the other side and its copy does not). Its FITS column formats are `str`
    subclasses equal to every spelling of one format (`'1J' == 'J'`), and a gold restoring that
    comparison was `tampered` (`by its own __eq__, and not by the str it holds`): not of a class the
    repository had with an `__eq__` of its own."""
    from patchgym.harness import edited_defs

    path = tmp_path / "units_fixed.py"
    monkeypatch.setattr(edited_defs, "EDITED", {str(path.resolve()): (UNITS_AT_BASE.encode(), UNITS_FIXED.encode())})
    monkeypatch.setattr(edited_defs, "_DEFINITIONS", {})
    monkeypatch.setattr(edited_defs, "_BASE_CODE", {})
    monkeypatch.setattr(equality_probe, "_CHANGED_NAMES", [])
    with patchs_module(tmp_path, UNITS_FIXED, "units_fixed") as (module, seen):
        equality_probe.protect([__file__])
        same = module.Unit("radian", 1.0, (module.rad,))
        assert equality_probe.equal_now(same, module.rad) and not seen, seen
        assert equality_probe.equal_now(module.Format("1J"), "J") and not seen, seen
    # (a made-in-a-test lie, whose base `__eq__` does not rest on identity, is still met:
    # tests/test_integrity_made_in_a_test.py)


# fpAF (stop 42): lark's test classes are made in a loop and given a `__qualname__` naming the module,
# so the ids unittest prints repeat it (`tests.test_gen.tests.test_gen.TestGen1.test_add`), and
# `loadTestsFromName` cannot load them: every graded id of three lark rows was MISSING under the signed
# runner. The runner now finds such an id among the tests of its longest importable module prefix.
GENERATED_TESTS = ("import unittest\n\nfrom calc import add\n\n\nclass TestPlain(unittest.TestCase):\n"
                   "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\n"
                   "def _make(offset):\n    class _T(unittest.TestCase):\n        def test_add(self):\n"
                   "            self.assertEqual(add(offset, 1), offset + 1)\n    name = 'TestGen%d' % offset\n"
                   "    _T.__name__ = name\n    _T.__qualname__ = 'tests.test_gen.' + name\n    globals()[name] = _T\n\n\n"
                   "for _o in (1, 2):\n    _make(_o)\n")


def test_a_generated_test_class_whose_id_names_no_import_path_runs_under_the_signed_runner(tmp_path) -> None:
    from patchgym.harness.grader import grade_patch
    from tests.fixtures_grading.calc_task import BASE_FILES, UNITTEST_BASE, build_prepared
    from tests.fixtures_grading.factories import any_factory_or_reason

    factory, reason = any_factory_or_reason()
    if factory is None:
        pytest.skip(reason or "no sandbox")
    fixed = BASE_FILES["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")
    prepared = build_prepared(tmp_path, instance_id="generated-ut", base_files=UNITTEST_BASE, log_parser="unittest",
                              test_patch_files={"tests/test_gen.py": GENERATED_TESTS}, gold_files={"calc/ops.py": fixed},
                              fail_to_pass=["tests.test_gen.tests.test_gen.TestGen1.test_add", "tests.test_gen.tests.test_gen.TestGen2.test_add"],
                              pass_to_pass=["tests.test_ops.OpsTest.test_sub"])[0]
    gold = grade_patch(prepared, prepared.task.patch, factory=factory, deadline_s=120)
    assert gold.reward == 1.0 and gold.status == "resolved", gold.model_dump_json(indent=1)
    empty = grade_patch(prepared, "", factory=factory, deadline_s=120, run_empty=True)
    assert empty.tests["FAIL_TO_PASS"]["tests.test_gen.tests.test_gen.TestGen1.test_add"] == "FAILED", empty.tests

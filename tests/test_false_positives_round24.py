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

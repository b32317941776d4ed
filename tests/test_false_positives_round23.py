"""False positives of a fifth hunt of the equality probe (fpAE, stop 41), on real PyPI libraries
with an injected bug, both runners: each shape graded `tampered` or `unresolved` on an honest fix.

- A matcher library's own `Any()`, `InstanceOf(object)`, `Captor()` equals every value by design,
  and its tests say so (`assert Any() == 42`): callee, equals and mockify golds editing the file of
  the matchers' `__eq__` were `tampered` (`equality_probe._everything_by_design`). callee's
  `Captor` keeps the first value it matches and raises at the next: each question is asked of the
  value as it was before the probe's (`_fresh`).
- lazy-object-proxy's `Proxy` makes its object on first use, and its `__dict__` and `__class__`
  are the object's: the probe read them while building its questions, and asked elements a
  sequence's comparison never reaches, so `(1, a) != (2, b)` and `[a] == [a]` made both proxies
  (`_instance_dict`, classes not `isinstance`, identical and unreached elements left alone).
"""

from __future__ import annotations

import pytest

from patchgym.harness import equality_probe
from tests.test_integrity_watched_methods import patchs_module


# fpAE (stop 41): a matcher library's own `Any()` equals every value by design, and its tests say so.
MATCHERS_AT_BASE = '''
class Matcher:
    def __eq__(self, other):
        if isinstance(other, Matcher):
            return NotImplemented
        return self.match(other)

    __hash__ = object.__hash__


class Any(Matcher):
    def match(self, value):
        return True


class Captor(Matcher):  # callee's: keeps the first value it matches, and raises at the next
    __slots__ = ("value",)

    def match(self, value):
        if hasattr(self, "value"):
            raise ValueError("a value has already been captured")
        self.value = value
        return True


class Either(Matcher):
    def __init__(self, *options):
        self.options = options

    def match(self, value):
        return all(value == option for option in self.options)  # the bug: all for any
'''
MATCHERS_FIXED = MATCHERS_AT_BASE.replace("return all(value == option", "return any(value == option")
MATCHERS_LIE = MATCHERS_AT_BASE.replace("return all(value == option for option in self.options)  # the bug: all for any",
                                        "return True")
# The gold edits the `__eq__` itself (a matcher compared with a matcher raises again); the lie makes it true for all.
MATCHERS_EQ_FIXED = MATCHERS_AT_BASE.replace("            return NotImplemented\n", "            raise TypeError('a matcher')\n")
MATCHERS_EQ_LIE = MATCHERS_AT_BASE.replace("            return NotImplemented\n        return self.match(other)",
                                           "            return NotImplemented\n        return True")


@pytest.mark.parametrize("fixed, lie", [(MATCHERS_FIXED, MATCHERS_LIE), (MATCHERS_EQ_FIXED, MATCHERS_EQ_LIE)],
                         ids=["fix-elsewhere", "fix-in-eq"])
def test_a_matcher_equal_to_everything_by_the_librarys_own_code_is_honest(tmp_path, monkeypatch, fixed, lie) -> None:
    from patchgym.harness import edited_defs

    for source, name, honest in ((fixed, "matchers_fixed", True), (lie, "matchers_lie", False)):
        path = tmp_path / f"{name}.py"
        monkeypatch.setattr(edited_defs, "EDITED", {str(path.resolve()): (MATCHERS_AT_BASE.encode(), source.encode())})
        monkeypatch.setattr(edited_defs, "_DEFINITIONS", {})
        monkeypatch.setattr(edited_defs, "_BASE_CODE", {})
        monkeypatch.setattr(equality_probe, "_CHANGED_NAMES", [])
        with patchs_module(tmp_path, source, name) as (module, seen):
            equality_probe.protect([__file__])
            assert equality_probe.equal_now(module.Any(), 42) and equality_probe.equal_now(module.Any(), None), seen
            if honest:
                assert equality_probe.equal_now(module.Either(2, 2), 2) and not seen, seen
                captor = module.Captor()
                assert equality_probe.equal_now(captor, "spam") and captor.value == "spam" and not seen, seen
            else:
                assert not equality_probe.equal_now(module.Either(1, 2), 3) and "equal to 3 and to another value" in seen[0]



LAZY = '''
class Proxy:  # lazy-object-proxy's shape: the object made on first use, its `__dict__` and `__class__` forwarded
    __slots__ = ("_factory", "_made")

    def __init__(self, factory):
        object.__setattr__(self, "_factory", factory)

    @property
    def _wrapped(self):
        try:
            return object.__getattribute__(self, "_made")
        except AttributeError:
            made = object.__getattribute__(self, "_factory")()
            object.__setattr__(self, "_made", made)
            return made

    @property
    def __dict__(self):
        return self._wrapped.__dict__

    @property
    def __class__(self):
        return self._wrapped.__class__

    def __eq__(self, other):
        return self._wrapped == other

    def __ne__(self, other):
        return self._wrapped != other

    __hash__ = None
'''


def test_a_comparison_that_never_reaches_a_lazy_proxy_leaves_it_lazy(tmp_path) -> None:
    with patchs_module(tmp_path, LAZY, "lazy_proxy_module") as (module, seen):
        equality_probe.protect([__file__])
        made: list = []
        a = module.Proxy(lambda: made.append("a") or "x")
        b = module.Proxy(lambda: made.append("b") or "x")
        assert equality_probe.unequal_now((1, a), (2, b)) and made == []
        assert equality_probe.equal_now([a], [a]) and equality_probe.contains(a, [a]) and made == []
        assert equality_probe.equal_now((1, a), (1, b)) and set(made) == {"a", "b"} and not seen  # reached: asked


def test_a_proxy_forwarding_its_dict_gets_no_copy(tmp_path, monkeypatch) -> None:
    """fpAE F (wrapt's pure-Python proxies): the copy the probe asks again was made with the dict the
    proxy forwards (the wrapped object's), wrapped nothing, and was unequal: an honest gold
    `tampered`. Such a class of the repository's gets no copy; the value itself is asked again. One
    the patch adds gets the copy it can make, as before."""
    from patchgym.harness import edited_defs

    path = tmp_path / "lazy_copy_module.py"
    monkeypatch.setattr(edited_defs, "EDITED", {str(path.resolve()): (LAZY.encode(), LAZY.encode())})
    monkeypatch.setattr(edited_defs, "_DEFINITIONS", {})
    added = ("\n\nclass PerProxy(Proxy):  # a subclass made per proxy, as wrapt's LazyObjectProxy does\n    __slots__ = ()\n"
             "\n\nclass Added:  # the patch's own, its `__dict__` a property too\n    __slots__ = ('held',)\n\n"
             "    @property\n    def __dict__(self):\n        return {}\n")
    with patchs_module(tmp_path, LAZY + added, "lazy_copy_module") as (module, _):
        assert equality_probe._copy_of(module.Proxy(lambda: "x")) is None
        assert equality_probe._copy_of(module.PerProxy(lambda: "x")) is None
        assert equality_probe._copy_of(module.Added()) is not None

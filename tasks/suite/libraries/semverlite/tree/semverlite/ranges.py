"""Version ranges: does a version satisfy "^1.2.0 || >=2.1.0 <3"?

A range is a union (`||`) of comparator sets; a comparator set is a space-separated list of
comparators that must all hold. Shorthands expand into comparators: caret (`^1.2.3`), tilde
(`~1.2.3`) and x-ranges (`1.2.x`, `1.x`, `*`, or missing parts such as `1.2`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, List, Optional, Tuple, Union

from semverlite.version import InvalidVersion, Version, coerce


class InvalidRange(ValueError):
    """The text is not a version range."""


_TERM = re.compile(r"^(?P<op>>=|<=|>|<|=|\^|~)?\s*v?(?P<version>\S+)$")
_WILDCARDS = {"x", "X", "*"}


@dataclass(frozen=True)
class Comparator:
    op: str
    version: Version

    def test(self, version: Version) -> bool:
        if self.op == ">=":
            return version >= self.version
        if self.op == ">":
            return version > self.version
        if self.op == "<=":
            return version <= self.version
        if self.op == "<":
            return version < self.version
        return version == self.version

    def __str__(self) -> str:
        return f"{self.op}{self.version}"


Partial = Tuple[Optional[int], Optional[int], Optional[int]]


def _partial(text: str) -> Tuple[Partial, Tuple[str, ...]]:
    """'1.2' -> ((1, 2, None), ()); '1.x' -> ((1, None, None), ()); full versions keep a prerelease."""
    if text in _WILDCARDS:
        return (None, None, None), ()
    try:
        full = Version.parse(text)
    except InvalidVersion:
        pass
    else:
        return (full.major, full.minor, full.patch), full.prerelease
    parts = text.split(".")
    if len(parts) > 3:
        raise InvalidRange(f"too many parts in {text!r}")
    numbers: List[Optional[int]] = []
    for part in parts:
        if part in _WILDCARDS:
            numbers.append(None)
        elif part.isdigit():
            if numbers and numbers[-1] is None:
                raise InvalidRange(f"a number after a wildcard in {text!r}")
            numbers.append(int(part))
        else:
            raise InvalidRange(f"not a version or x-range: {text!r}")
    while len(numbers) < 3:
        numbers.append(None)
    return (numbers[0], numbers[1], numbers[2]), ()


def _caret_upper(major: int, minor: int, patch: int) -> Version:
    # ^1.2.3 := <2.0.0, ^0.2.3 := <0.3.0, ^0.0.3 := <0.0.4: the left-most non-zero part is fixed.
    if major > 0:
        return Version(major + 1, 0, 0)
    if minor > 0:
        return Version(0, minor + 1, 0)
    return Version(0, 0, patch + 1)


def _expand(op: str, text: str) -> List[Comparator]:
    (major, minor, patch), pre = _partial(text)
    if major is None:
        return []  # "*" matches every version
    if op == "^":
        low = Version(major, minor or 0, patch or 0, pre)
        if minor is None:
            high = Version(major + 1, 0, 0)
        elif patch is None and major == 0:
            high = Version(0, minor + 1, 0)
        else:
            high = _caret_upper(major, minor, patch or 0)
        return [Comparator(">=", low), Comparator("<", high)]
    if op == "~":
        low = Version(major, minor or 0, patch or 0, pre)
        high = Version(major + 1, 0, 0) if minor is None else Version(major, minor + 1, 0)
        return [Comparator(">=", low), Comparator("<", high)]
    if minor is None or patch is None:
        # x-range: 1.x := >=1.0.0 <2.0.0, 1.2.x := >=1.2.0 <1.3.0
        low = Version(major, minor or 0, 0)
        high = Version(major + 1, 0, 0) if minor is None else Version(major, minor + 1, 0)
        if op in ("", "="):
            return [Comparator(">=", low), Comparator("<", high)]
        if op == ">":
            return [Comparator(">=", high)]
        if op == "<":
            return [Comparator("<", low)]
        if op == ">=":
            return [Comparator(">=", low)]
        return [Comparator("<", high)]  # "<="
    return [Comparator(op or "=", Version(major, minor, patch, pre))]


def parse_range(text: str) -> List[List[Comparator]]:
    """The comparator sets of a range; an empty set matches every version."""
    if not text.strip():
        return [[]]
    alternatives = []
    for alternative in text.split("||"):
        comparators: List[Comparator] = []
        # "> = 1.2" style spacing: glue an operator to the term that follows it.
        tokens = re.sub(r"(>=|<=|>|<|=|\^|~)\s+", r"\1", alternative.strip()).split()
        for token in tokens:
            match = _TERM.match(token)
            if match is None:
                raise InvalidRange(f"cannot read {token!r} in range {text!r}")
            comparators.extend(_expand(match.group("op") or "", match.group("version")))
        alternatives.append(comparators)
    return alternatives


def satisfies(version: Union[str, Version], range_text: str) -> bool:
    v = coerce(version)
    return any(all(c.test(v) for c in comparators) for comparators in parse_range(range_text))


def max_satisfying(versions: Iterable[Union[str, Version]], range_text: str) -> Optional[Version]:
    """The highest of `versions` inside the range, or None."""
    matching = [coerce(v) for v in versions if satisfies(v, range_text)]
    return max(matching) if matching else None


def min_satisfying(versions: Iterable[Union[str, Version]], range_text: str) -> Optional[Version]:
    """The lowest of `versions` inside the range, or None."""
    matching = [coerce(v) for v in versions if satisfies(v, range_text)]
    return min(matching) if matching else None

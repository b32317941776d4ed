"""Turning option text into Python values: integers, floats, booleans and lists."""

from __future__ import annotations

from typing import Any, List

TRUE_WORDS = {"1", "yes", "true", "on"}
FALSE_WORDS = {"0", "no", "false", "off"}


def to_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(f"not an integer: {value!r}") from None


def to_float(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        return float(value.strip())
    except ValueError:
        raise ValueError(f"not a number: {value!r}") from None


def to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"not a boolean: {value!r} (use one of {sorted(TRUE_WORDS | FALSE_WORDS)})")


def to_list(value: Any, separator: str = ",") -> List[str]:
    """`a, b,c` -> ['a', 'b', 'c']; a multi-line value splits on lines as well."""
    if isinstance(value, (list, tuple)):
        return list(value)
    parts = [part for line in value.splitlines() for part in line.split(separator)]
    return [part.strip() for part in parts if part.strip()]

"""Interpolation: `${option}` and `${section:option}` in values, `$$` for a literal `$`."""

from __future__ import annotations

import re
from typing import Any

MAX_DEPTH = 10
_REFERENCE = re.compile(r"\$(?:(\$)|\{([^{}]*)\})")


class InterpolationError(ValueError):
    pass


def expand(value: str, config: Any, section: str, depth: int = 0) -> str:
    """`value` with references replaced by the (expanded) values they name."""
    if "$" not in value:
        return value
    if depth > MAX_DEPTH:
        raise InterpolationError(f"references nested more than {MAX_DEPTH} deep in [{section}] (a cycle?)")

    def substitute(match: "re.Match[str]") -> str:
        if match.group(1):
            return "$"
        reference = match.group(2).strip()
        target_section, _, option = reference.rpartition(":")
        target_section = target_section or section
        try:
            raw = config.raw(target_section, option)
        except KeyError as exc:
            raise InterpolationError(f"cannot resolve ${{{reference}}} in [{section}]: {exc}") from None
        return expand(raw, config, target_section, depth + 1)

    return _REFERENCE.sub(substitute, value)

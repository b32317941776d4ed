"""Splitting INI text into logical lines: section headers, options (with continuations), comments."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import List

COMMENT_PREFIXES = ("#", ";")
QUOTES = ("'", '"')


class LexError(ValueError):
    def __init__(self, lineno: int, message: str) -> None:
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


@dataclass(frozen=True)
class Line:
    kind: str  # "section", "option", "comment" or "blank"
    lineno: int
    name: str = ""
    value: str = ""


def strip_inline_comment(value: str) -> str:
    """`8080 ; public port` -> `8080`: a comment starts at `;` or `#` after whitespace, outside quotes."""
    quote = None
    for index, char in enumerate(value):
        if quote:
            if char == quote:
                quote = None
        elif char in QUOTES:
            quote = char
        elif char in COMMENT_PREFIXES and index > 0 and value[index - 1] in " \t":
            return value[:index].rstrip()
    return value


def unquote(value: str) -> str:
    """`"a b"` -> `a b`; anything not wrapped in one kind of quote is returned as is."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in QUOTES:
        return value[1:-1]
    return value


def tokenize(text: str) -> List[Line]:
    lines: List[Line] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped:
            lines.append(Line("blank", lineno))
            continue
        if stripped[0] in COMMENT_PREFIXES:
            lines.append(Line("comment", lineno, value=stripped[1:].strip()))
            continue
        if raw[0] in " \t" and lines and lines[-1].kind == "option":
            previous = lines[-1]
            lines[-1] = replace(previous, value=previous.value + "\n" + stripped)
            continue
        if stripped.startswith("["):
            if not stripped.endswith("]"):
                raise LexError(lineno, f"unclosed section header {stripped!r}")
            name = stripped[1:-1].strip()
            if not name:
                raise LexError(lineno, "empty section name")
            lines.append(Line("section", lineno, name=name))
            continue
        positions = [i for i in (stripped.find("="), stripped.find(":")) if i >= 0]
        if not positions:
            raise LexError(lineno, f"expected 'name = value', got {stripped!r}")
        split_at = min(positions)
        name = stripped[:split_at].strip()
        if not name:
            raise LexError(lineno, "an option needs a name before '='")
        value = unquote(strip_inline_comment(stripped[split_at + 1 :].strip()))
        lines.append(Line("option", lineno, name=name, value=value))
    return lines

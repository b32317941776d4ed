"""Building a Config from INI text: sections, options, the default section, duplicate checks."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

from iniconf.config import Config
from iniconf.lexer import LexError, tokenize


class ParseError(ValueError):
    """The text is not valid INI; the message starts with the line number."""


def loads(text: str, *, default_section: str = "DEFAULT", strict: bool = True) -> Config:
    """Parse INI text. With `strict`, a repeated section or option is an error; otherwise the last wins."""
    try:
        lines = tokenize(text)
    except LexError as exc:
        raise ParseError(str(exc)) from None
    config = Config(default_section=default_section)
    section: Optional[str] = None
    seen_sections = set()
    for line in lines:
        if line.kind == "section":
            if strict and line.name in seen_sections:
                raise ParseError(f"line {line.lineno}: section {line.name!r} appears twice")
            seen_sections.add(line.name)
            section = line.name
            config.add_section(section)
        elif line.kind == "option":
            if section is None:
                raise ParseError(f"line {line.lineno}: option {line.name!r} comes before any [section]")
            if strict and config.has_own_option(section, line.name):
                raise ParseError(f"line {line.lineno}: option {line.name!r} appears twice in [{section}]")
            config.set(section, line.name, line.value)
    return config


def load(path: Union[str, Path], **options: object) -> Config:
    return loads(Path(path).read_text(encoding="utf-8"), **options)  # type: ignore[arg-type]

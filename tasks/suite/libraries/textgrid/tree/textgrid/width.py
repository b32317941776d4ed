"""How many terminal cells text takes: wide East Asian characters two, combining marks none."""

from __future__ import annotations

import unicodedata


def char_width(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    if unicodedata.east_asian_width(char) in ("W", "F"):
        return 2
    return 1


def display_width(text: str) -> int:
    return sum(char_width(char) for char in text)

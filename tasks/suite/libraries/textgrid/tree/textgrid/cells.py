"""One cell: a value as text, padded to a width or truncated with an ellipsis."""

from __future__ import annotations

from textgrid.width import char_width, display_width

ALIGNMENTS = ("left", "right", "center")


def to_text(value: object, float_format: str = ".2f") -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return format(value, float_format)
    return str(value)


def pad(text: str, width: int, align: str = "left") -> str:
    """`text` padded with spaces to `width` terminal cells."""
    if align not in ALIGNMENTS:
        raise ValueError(f"unknown alignment {align!r}; use one of {ALIGNMENTS}")
    gap = max(width - display_width(text), 0)
    if align == "left":
        return text + " " * gap
    if align == "right":
        return " " * gap + text
    left = gap // 2
    return " " * left + text + " " * (gap - left)


def truncate(text: str, width: int, ellipsis: str = "…") -> str:
    """`text` cut to at most `width` cells, ending in `ellipsis` when something was cut off."""
    if display_width(text) <= width:
        return text
    keep = width - display_width(ellipsis)
    kept, used = "", 0
    for char in text:
        if used + char_width(char) > keep:
            break
        kept += char
        used += char_width(char)
    return kept + ellipsis

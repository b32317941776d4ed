"""Rendering a table: values to text, layout, then one of the styles (plain, grid, markdown)."""

from __future__ import annotations

from typing import List, Optional, Sequence

from textgrid.cells import pad, to_text, truncate
from textgrid.columns import align_decimals, column_count, column_widths, guess_alignments

STYLES = ("plain", "grid", "markdown")


def _markdown_rule(width: int, align: str) -> str:
    if align == "right":
        return "-" * (width + 1) + ":"
    if align == "center":
        return ":" + "-" * width + ":"
    return ":" + "-" * (width + 1)


def render(
    rows: Sequence[Sequence[object]],
    headers: Optional[Sequence[object]] = None,
    *,
    style: str = "plain",
    align: Optional[Sequence[str]] = None,
    max_width: Optional[int] = None,
    float_format: str = ".2f",
) -> str:
    """The table as text, one line per row (plus header and border lines, by style)."""
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}; use one of {STYLES}")
    body: List[List[str]] = [[to_text(value, float_format) for value in row] for row in rows]
    head = [to_text(value) for value in headers] if headers else None
    count = column_count(body, head)
    body = [row + [""] * (count - len(row)) for row in body]
    if head:
        head = head + [""] * (count - len(head))
    if style == "markdown":
        body = [[cell.replace("|", "\\|") for cell in row] for row in body]
        head = [cell.replace("|", "\\|") for cell in head] if head else None
    if max_width is not None:
        body = [[truncate(cell, max_width) for cell in row] for row in body]
        head = [truncate(cell, max_width) for cell in head] if head else None

    alignments = list(align) if align else guess_alignments(body, count)
    for index, alignment in enumerate(alignments):
        if alignment == "decimal" and body:
            for row, cell in zip(body, align_decimals([row[index] for row in body])):
                row[index] = cell
    pad_as = ["right" if alignment == "decimal" else alignment for alignment in alignments]
    widths = column_widths(body, head)

    def cells(row: Sequence[str]) -> List[str]:
        return [pad(cell, width, how) for cell, width, how in zip(row, widths, pad_as)]

    lines: List[str] = []
    if style == "plain":
        if head:
            lines.append("  ".join(cells(head)).rstrip())
            lines.append("  ".join("-" * width for width in widths))
        lines.extend("  ".join(cells(row)).rstrip() for row in body)
    elif style == "grid":
        border = "+" + "+".join("-" * (width + 2) for width in widths) + "+"
        lines.append(border)
        if head:
            lines.append("| " + " | ".join(cells(head)) + " |")
            lines.append(border.replace("-", "="))
        lines.extend("| " + " | ".join(cells(row)) + " |" for row in body)
        lines.append(border)
    else:
        lines.append("| " + " | ".join(cells(head or [""] * count)) + " |")
        lines.append("|" + "|".join(_markdown_rule(width, how) for width, how in zip(widths, pad_as)) + "|")
        lines.extend("| " + " | ".join(cells(row)) + " |" for row in body)
    return "\n".join(lines) if count else ""

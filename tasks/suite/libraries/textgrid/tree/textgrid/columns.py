"""Column layout: widths from the content, guessed alignments, decimal-point alignment."""

from __future__ import annotations

from typing import List, Optional, Sequence

from textgrid.width import display_width


def column_count(rows: Sequence[Sequence[str]], headers: Optional[Sequence[str]] = None) -> int:
    table = ([list(headers)] if headers else []) + [list(row) for row in rows]
    return max((len(row) for row in table), default=0)


def column_widths(rows: Sequence[Sequence[str]], headers: Optional[Sequence[str]] = None) -> List[int]:
    """The widest cell of each column, in terminal cells (headers included)."""
    widths = [0] * column_count(rows, headers)
    for row in ([headers] if headers else []) + list(rows):
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], display_width(cell))
    return widths


def is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def guess_alignments(rows: Sequence[Sequence[str]], count: int) -> List[str]:
    """'decimal' for columns holding only numbers (blanks aside), 'left' for the others."""
    alignments = []
    for index in range(count):
        cells = [row[index] for row in rows if index < len(row) and row[index].strip()]
        alignments.append("decimal" if cells and all(is_number(cell) for cell in cells) else "left")
    return alignments


def align_decimals(cells: Sequence[str]) -> List[str]:
    """Numbers padded so their decimal points line up: ['1.5', '12'] -> [' 1.5', '12  ']."""
    parts = [cell.strip().partition(".") for cell in cells]
    whole_width = max((len(whole) for whole, _, _ in parts), default=0)
    fraction_width = max((len(dot + fraction) for _, dot, fraction in parts), default=0)
    return [whole.rjust(whole_width) + (dot + fraction).ljust(fraction_width) for whole, dot, fraction in parts]

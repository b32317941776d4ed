"""Month arithmetic: month starts and ends, adding months, whole months between two dates."""

from __future__ import annotations

import calendar
from datetime import date


def days_in_month(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def month_start(day: date) -> date:
    return day.replace(day=1)


def month_end(day: date) -> date:
    return day.replace(day=days_in_month(day.year, day.month))


def add_months(day: date, months: int) -> date:
    """`day` moved by `months` calendar months (negative: back), clamped to shorter months."""
    year, month_index = divmod(day.year * 12 + day.month - 1 + months, 12)
    month = month_index + 1
    return date(year, month, min(day.day, days_in_month(year, month)))


def months_between(start: date, end: date) -> int:
    """Whole months from `start` to `end` (0 when less than a month apart; negative if end < start)."""
    if end < start:
        return -months_between(end, start)
    months = (end.year - start.year) * 12 + end.month - start.month
    if add_months(start, months) > end:
        months -= 1
    return months

"""Recurring dates: every N days, weeks or months from a start date, and the ones inside a range."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Iterable, Iterator, List

from spancal.months import add_months
from spancal.ranges import DateRange


def daily(start: date, every: int = 1) -> Iterator[date]:
    day = start
    while True:
        yield day
        day += timedelta(days=every)


def weekly(start: date, every: int = 1) -> Iterator[date]:
    return daily(start, every * 7)


def monthly(start: date, every: int = 1) -> Iterator[date]:
    """`start`, then every `every` months on the start's day of the month (clamped, never drifting)."""
    count = 0
    while True:
        yield add_months(start, count * every)
        count += 1


def occurrences(rule: Iterable[date], span: DateRange) -> List[date]:
    """The dates of an increasing `rule` that fall inside `span`."""
    found = []
    for day in rule:
        if day > span.end:
            break
        if day >= span.start:
            found.append(day)
    return found

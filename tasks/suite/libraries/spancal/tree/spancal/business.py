"""Business days: Monday to Friday, minus the holidays you pass in."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Collection

from spancal.ranges import DateRange


def is_business_day(day: date, holidays: Collection[date] = ()) -> bool:
    return day.weekday() < 5 and day not in holidays


def add_business_days(start: date, days: int, holidays: Collection[date] = ()) -> date:
    """The business day `days` business days after `start` (before it when negative)."""
    step = timedelta(days=1 if days >= 0 else -1)
    current = start
    for _ in range(abs(days)):
        current += step
        while not is_business_day(current, holidays):
            current += step
    return current


def next_business_day(day: date, holidays: Collection[date] = ()) -> date:
    """`day` itself when it is a business day, else the first business day after it."""
    while not is_business_day(day, holidays):
        day += timedelta(days=1)
    return day


def count_business_days(span: DateRange, holidays: Collection[date] = ()) -> int:
    return sum(1 for day in span if is_business_day(day, holidays))

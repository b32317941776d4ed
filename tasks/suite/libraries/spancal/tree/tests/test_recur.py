from datetime import date
from itertools import islice

from spancal import DateRange, daily, monthly, occurrences, weekly


def first(rule, n):
    return list(islice(rule, n))


def test_daily_every_other_day():
    assert first(daily(date(2024, 1, 30), 2), 3) == [date(2024, 1, 30), date(2024, 2, 1), date(2024, 2, 3)]


def test_weekly():
    assert first(weekly(date(2024, 1, 1)), 3) == [date(2024, 1, 1), date(2024, 1, 8), date(2024, 1, 15)]


def test_monthly_simple():
    assert first(monthly(date(2024, 1, 15)), 3) == [date(2024, 1, 15), date(2024, 2, 15), date(2024, 3, 15)]


def test_monthly_every_quarter():
    assert first(monthly(date(2024, 2, 10), 3), 3) == [date(2024, 2, 10), date(2024, 5, 10), date(2024, 8, 10)]


def test_monthly_clamps_to_february():
    assert first(monthly(date(2024, 1, 31)), 2) == [date(2024, 1, 31), date(2024, 2, 29)]


def test_monthly_does_not_drift_after_short_months():
    assert first(monthly(date(2024, 1, 31)), 4) == [
        date(2024, 1, 31), date(2024, 2, 29), date(2024, 3, 31), date(2024, 4, 30),
    ]


def test_occurrences_inside_a_range():
    span = DateRange(date(2024, 1, 10), date(2024, 1, 31))
    assert occurrences(weekly(date(2024, 1, 1)), span) == [date(2024, 1, 15), date(2024, 1, 22), date(2024, 1, 29)]

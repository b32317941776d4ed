from datetime import date

import pytest

from spancal import DateRange


def d(day, month=1, year=2024):
    return date(year, month, day)


def test_end_before_start_is_rejected():
    with pytest.raises(ValueError, match="cannot end"):
        DateRange(d(5), d(4))


def test_iteration_includes_both_ends():
    assert list(DateRange(d(1), d(3))) == [d(1), d(2), d(3)]


def test_length_counts_both_ends():
    assert len(DateRange(d(1), d(3))) == 3
    assert len(DateRange(d(1), d(31))) == 31


def test_single_day_range():
    span = DateRange(d(7), d(7))
    assert len(span) == 1
    assert list(span) == [d(7)]


def test_contains():
    span = DateRange(d(1), d(10))
    assert d(1) in span and d(10) in span
    assert d(11) not in span
    assert "2024-01-05" not in span


def test_overlaps_and_intersection():
    a, b = DateRange(d(1), d(10)), DateRange(d(10), d(20))
    assert a.overlaps(b)
    assert a.intersection(b) == DateRange(d(10), d(10))
    assert a.intersection(DateRange(d(11), d(12))) is None


def test_shift():
    assert DateRange(d(1), d(2)).shift(3) == DateRange(d(4), d(5))


def test_split_by_month_across_a_year():
    pieces = DateRange(date(2023, 12, 20), date(2024, 2, 3)).split_by_month()
    assert pieces == [
        DateRange(date(2023, 12, 20), date(2023, 12, 31)),
        DateRange(date(2024, 1, 1), date(2024, 1, 31)),
        DateRange(date(2024, 2, 1), date(2024, 2, 3)),
    ]


def test_month_constructor():
    assert DateRange.month(2024, 2) == DateRange(d(1, 2), d(29, 2))

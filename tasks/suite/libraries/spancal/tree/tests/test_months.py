from datetime import date

from spancal.months import add_months, days_in_month, month_end, month_start, months_between


def test_days_in_month():
    assert days_in_month(2024, 2) == 29
    assert days_in_month(2023, 2) == 28
    assert days_in_month(2024, 4) == 30


def test_month_start_and_end():
    assert month_start(date(2024, 5, 17)) == date(2024, 5, 1)
    assert month_end(date(2024, 5, 17)) == date(2024, 5, 31)


def test_add_months_simple():
    assert add_months(date(2024, 1, 15), 1) == date(2024, 2, 15)
    assert add_months(date(2024, 1, 15), 14) == date(2025, 3, 15)


def test_add_months_backwards_across_a_year():
    assert add_months(date(2024, 1, 15), -1) == date(2023, 12, 15)
    assert add_months(date(2024, 3, 10), -15) == date(2022, 12, 10)


def test_add_months_clamps_to_shorter_months():
    assert add_months(date(2024, 1, 31), 1) == date(2024, 2, 29)
    assert add_months(date(2023, 1, 31), 1) == date(2023, 2, 28)
    assert add_months(date(2024, 3, 31), -1) == date(2024, 2, 29)
    assert add_months(date(2024, 5, 31), 1) == date(2024, 6, 30)


def test_months_between():
    assert months_between(date(2024, 1, 15), date(2024, 3, 15)) == 2
    assert months_between(date(2024, 1, 15), date(2024, 3, 14)) == 1
    assert months_between(date(2024, 3, 15), date(2024, 1, 15)) == -2

from datetime import date

from spancal import DateRange, add_business_days, count_business_days, is_business_day, next_business_day

FRIDAY, SATURDAY, MONDAY = date(2024, 3, 8), date(2024, 3, 9), date(2024, 3, 11)


def test_weekends_are_not_business_days():
    assert is_business_day(FRIDAY)
    assert not is_business_day(SATURDAY)


def test_holidays_are_not_business_days():
    assert not is_business_day(MONDAY, holidays={MONDAY})


def test_add_business_days_skips_weekends():
    assert add_business_days(FRIDAY, 1) == MONDAY
    assert add_business_days(FRIDAY, 6) == date(2024, 3, 18)


def test_add_business_days_skips_holidays():
    assert add_business_days(FRIDAY, 1, holidays={MONDAY}) == date(2024, 3, 12)


def test_add_zero_business_days():
    assert add_business_days(SATURDAY, 0) == SATURDAY


def test_add_business_days_backwards():
    assert add_business_days(MONDAY, -1) == FRIDAY
    assert add_business_days(date(2024, 3, 13), -3, holidays={MONDAY}) == date(2024, 3, 7)


def test_next_business_day():
    assert next_business_day(FRIDAY) == FRIDAY
    assert next_business_day(SATURDAY) == MONDAY


def test_count_business_days():
    assert count_business_days(DateRange(date(2024, 3, 1), date(2024, 3, 31))) == 21
    assert count_business_days(DateRange(FRIDAY, MONDAY), holidays={MONDAY}) == 1

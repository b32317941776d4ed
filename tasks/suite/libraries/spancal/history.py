"""spancal's history: 13 commits on main (one merged fix branch), four tasks."""

from patchgym.tasks.suite.history import Added, Commit, Edit, Library, NewTests, TaskSpec

README_USAGE = """```python
>>> from datetime import date
>>> from spancal import DateRange, add_months, add_business_days
>>> len(DateRange(date(2024, 1, 1), date(2024, 1, 31)))
31
>>> add_months(date(2024, 1, 31), 1)
datetime.date(2024, 2, 29)
>>> add_business_days(date(2024, 3, 8), 1)
datetime.date(2024, 3, 11)
```

- `DateRange(start, end)` includes both ends; it iterates, splits by month, intersects.
- `add_months` clamps to the end of shorter months.
- `monthly(start)` repeats on the start's day of the month, clamped but never drifting.

"""

MONTHLY_DRIFTING = (
    '    """`start`, then every `every` months on the start\'s day of the month."""\n'
    "    day = start\n"
    "    while True:\n"
    "        yield day\n"
    "        day = add_months(day, every)\n"
)
MONTHLY_ANCHORED = (
    '    """`start`, then every `every` months on the start\'s day of the month (clamped, never drifting)."""\n'
    "    count = 0\n"
    "    while True:\n"
    "        yield add_months(start, count * every)\n"
    "        count += 1\n"
)
FORWARD_ONLY = (
    '    """The business day `days` business days after `start`."""\n'
    "    current = start\n"
    "    for _ in range(days):\n"
    "        current += timedelta(days=1)\n"
    "        while not is_business_day(current, holidays):\n"
    "            current += timedelta(days=1)\n"
    "    return current\n"
)
BOTH_WAYS = (
    '    """The business day `days` business days after `start` (before it when negative)."""\n'
    "    step = timedelta(days=1 if days >= 0 else -1)\n"
    "    current = start\n"
    "    for _ in range(abs(days)):\n"
    "        current += step\n"
    "        while not is_business_day(current, holidays):\n"
    "            current += step\n"
    "    return current\n"
)

COMMITS = [
    Commit(
        "skeleton",
        "Start spancal: DateRange and month arithmetic",
        add=["pyproject.toml", "README.md", ".gitignore", "spancal/__init__.py", "spancal/months.py", "spancal/ranges.py",
             "tests/test_months.py", "tests/test_ranges.py"],
    ),
    Commit(
        "business",
        "Business days: is_business_day, add_business_days, count_business_days",
        add=["spancal/business.py", "tests/test_business.py"],
        edit={"spancal/__init__.py": [Edit("", "from spancal.business import add_business_days, count_business_days, is_business_day\n")]},
        tag="v0.1.0",
    ),
    Commit(
        "changelog",
        "Keep a changelog",
        add=["CHANGELOG.md"],
        author="contributor",
    ),
    Commit(
        "fix-range-length",
        "DateRange: len() counts both ends",
        edit={
            "spancal/ranges.py": [Edit("        return (self.end - self.start).days\n", "        return (self.end - self.start).days + 1\n")],
            "tests/test_ranges.py": [NewTests("test_length_counts_both_ends", "test_single_day_range")],
        },
        author="contributor",
    ),
    Commit(
        "recur",
        "Recurring dates: daily, weekly, monthly and occurrences",
        add=["spancal/recur.py", "tests/test_recur.py"],
        edit={
            "spancal/__init__.py": [Edit("", "from spancal.recur import daily, monthly, occurrences, weekly\n")],
            "pyproject.toml": [Edit('version = "0.1.0"', 'version = "0.2.0"')],
            "CHANGELOG.md": [
                Edit("# Changelog\n\n", "# Changelog\n\n## 0.2.0\n- Recurring dates: `daily`, `weekly`, `monthly`, `occurrences`.\n\n")
            ],
        },
        tag="v0.2.0",
        tag_message="spancal 0.2.0: recurring dates",
    ),
    Commit(
        "month-constructor",
        "DateRange.month(year, month)",
        edit={
            "spancal/ranges.py": [
                Edit("from spancal.months import month_end\n", "from spancal.months import days_in_month, month_end\n"),
                Added("DateRange.month"),
            ],
            "tests/test_ranges.py": [NewTests("test_month_constructor")],
        },
    ),
    Commit(
        "fix-add-months-clamp",
        "add_months: clamp the day to the length of the target month",
        edit={
            "spancal/months.py": [
                Edit(
                    "    return date(year, month, day.day)\n",
                    "    return date(year, month, min(day.day, days_in_month(year, month)))\n",
                )
            ],
            "tests/test_months.py": [NewTests("test_add_months_clamps_to_shorter_months")],
            "tests/test_recur.py": [NewTests("test_monthly_clamps_to_february")],
        },
        author="contributor",
        merge=True,
    ),
    Commit(
        "release-0.3",
        "Release 0.3.0",
        edit={
            "pyproject.toml": [Edit('version = "0.2.0"', 'version = "0.3.0"')],
            "CHANGELOG.md": [Edit("# Changelog\n\n", "# Changelog\n\n## 0.3.0\n- `DateRange.month(year, month)`.\n\n")],
        },
        tag="v0.3.0",
        tag_message="spancal 0.3.0",
    ),
    Commit(
        "fix-monthly-drift",
        "monthly: count from the start date so short months do not shift later dates",
        edit={
            "spancal/recur.py": [Edit(MONTHLY_DRIFTING, MONTHLY_ANCHORED)],
            "tests/test_recur.py": [NewTests("test_monthly_does_not_drift_after_short_months")],
        },
    ),
    Commit(
        "next-business-day",
        "Add next_business_day",
        edit={
            "spancal/business.py": [Added("next_business_day")],
            "spancal/__init__.py": [Edit("is_business_day\n", "is_business_day, next_business_day\n")],
            "tests/test_business.py": [
                Edit("is_business_day\n", "is_business_day, next_business_day\n"),
                NewTests("test_next_business_day"),
            ],
        },
        author="contributor",
    ),
    Commit(
        "fix-business-backwards",
        "add_business_days: count backwards for negative counts",
        edit={
            "spancal/business.py": [Edit(FORWARD_ONLY, BOTH_WAYS)],
            "tests/test_business.py": [NewTests("test_add_business_days_backwards")],
        },
    ),
    Commit(
        "release-0.4",
        "Release 0.4.0",
        edit={
            "pyproject.toml": [Edit('version = "0.3.0"', 'version = "0.4.0"')],
            "CHANGELOG.md": [
                Edit(
                    "# Changelog\n\n",
                    "# Changelog\n\n## 0.4.0\n- `next_business_day`.\n- `add_business_days` counts backwards for negative counts.\n\n",
                )
            ],
        },
        tag="v0.4.0",
        tag_message="spancal 0.4.0",
    ),
    Commit(
        "readme-usage",
        "README: usage",
        edit={"README.md": [Edit("no dependencies.\n\n", "no dependencies.\n\n" + README_USAGE)]},
        author="contributor",
    ),
]

TASKS = [
    TaskSpec(
        slug="range-length-off-by-one",
        fix="fix-range-length",
        difficulty="easy",
        tags=["single-line", "off-by-one", "new-test"],
        fail_to_pass=["tests/test_ranges.py::test_length_counts_both_ends", "tests/test_ranges.py::test_single_day_range"],
        problem_statement="""\
len(DateRange) is one short

`DateRange.__len__` in `spancal/ranges.py` does not count the last day, although a range includes
both ends (iterating it does):

```python
>>> from datetime import date
>>> from spancal import DateRange
>>> len(DateRange(date(2024, 1, 1), date(2024, 1, 3)))
2
>>> list(DateRange(date(2024, 1, 1), date(2024, 1, 3)))
[datetime.date(2024, 1, 1), datetime.date(2024, 1, 2), datetime.date(2024, 1, 3)]
```

Expected `3`. A single-day range `DateRange(d, d)` has length 0 today; it should be 1.
""",
    ),
    TaskSpec(
        slug="add-months-month-end",
        fix="fix-add-months-clamp",
        difficulty="medium",
        tags=["edge-case", "new-test"],
        fail_to_pass=[
            "tests/test_months.py::test_add_months_clamps_to_shorter_months",
            "tests/test_recur.py::test_monthly_clamps_to_february",
        ],
        problem_statement="""\
add_months crashes at the end of the month

```python
>>> from datetime import date
>>> from spancal import add_months
>>> add_months(date(2024, 1, 31), 1)
ValueError: day is out of range for month
```

Expected `date(2024, 2, 29)`: when the target month is shorter, the result should be its last
day (`add_months(date(2023, 1, 31), 1) == date(2023, 2, 28)`, `add_months(date(2024, 5, 31), 1)
== date(2024, 6, 30)`, and backwards too). Because of this, `monthly(date(2024, 1, 31))` crashes
on its second date as well.
""",
    ),
    TaskSpec(
        slug="monthly-drift",
        fix="fix-monthly-drift",
        difficulty="medium",
        tags=["logic", "new-test"],
        fail_to_pass=["tests/test_recur.py::test_monthly_does_not_drift_after_short_months"],
        problem_statement="""\
monthly() drifts after February

We bill on the last day of the month with `monthly(date(2024, 1, 31))`:

```python
>>> from itertools import islice
>>> list(islice(monthly(date(2024, 1, 31)), 4))
[datetime.date(2024, 1, 31), datetime.date(2024, 2, 29), datetime.date(2024, 3, 29), datetime.date(2024, 4, 29)]
```

Once February clamps the day to the 29th, every later date stays on the 29th. Expected
`[2024-01-31, 2024-02-29, 2024-03-31, 2024-04-30]`: each date should be on the start's day of the
month, clamped only in months that are too short. `every=3` and ordinary days (the 15th) work.
""",
    ),
    TaskSpec(
        slug="business-days-backwards",
        fix="fix-business-backwards",
        difficulty="medium",
        tags=["edge-case", "new-test"],
        fail_to_pass=["tests/test_business.py::test_add_business_days_backwards"],
        problem_statement="""\
add_business_days ignores negative counts

We compute deadlines "3 business days before" an event:

```python
>>> from datetime import date
>>> from spancal import add_business_days
>>> add_business_days(date(2024, 3, 11), -1)   # a Monday
datetime.date(2024, 3, 11)
```

Expected Friday `date(2024, 3, 8)`. Negative counts should move backwards, skipping weekends and
the given holidays just like forward counts do; `add_business_days(d, 0)` must still return `d`.
""",
    ),
]

LIBRARY = Library(
    name="spancal",
    owner="patchgym-suite",
    commits=COMMITS,
    tasks=TASKS,
    first_date=1711929600,  # 2024-04-01
)

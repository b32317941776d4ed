"""DateRange: the days from a start to an end date, both included."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Iterator, List, Optional

from spancal.months import days_in_month, month_end


@dataclass(frozen=True)
class DateRange:
    start: date
    end: date

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError(f"a range cannot end ({self.end}) before it starts ({self.start})")

    @classmethod
    def month(cls, year: int, month: int) -> "DateRange":
        return cls(date(year, month, 1), date(year, month, days_in_month(year, month)))

    def __len__(self) -> int:
        return (self.end - self.start).days + 1

    def __contains__(self, day: object) -> bool:
        return isinstance(day, date) and self.start <= day <= self.end

    def __iter__(self) -> Iterator[date]:
        day = self.start
        while day <= self.end:
            yield day
            day += timedelta(days=1)

    def overlaps(self, other: "DateRange") -> bool:
        return self.start <= other.end and other.start <= self.end

    def intersection(self, other: "DateRange") -> Optional["DateRange"]:
        if not self.overlaps(other):
            return None
        return DateRange(max(self.start, other.start), min(self.end, other.end))

    def shift(self, days: int) -> "DateRange":
        delta = timedelta(days=days)
        return DateRange(self.start + delta, self.end + delta)

    def split_by_month(self) -> List["DateRange"]:
        """The range cut at month boundaries, in order."""
        pieces = []
        start = self.start
        while start <= self.end:
            end = min(month_end(start), self.end)
            pieces.append(DateRange(start, end))
            start = end + timedelta(days=1)
        return pieces

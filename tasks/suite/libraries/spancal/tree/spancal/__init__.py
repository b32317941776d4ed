"""spancal: date ranges, month arithmetic, business days and recurring dates."""

from spancal.months import add_months, days_in_month, month_end, month_start, months_between
from spancal.ranges import DateRange
from spancal.business import add_business_days, count_business_days, is_business_day, next_business_day
from spancal.recur import daily, monthly, occurrences, weekly

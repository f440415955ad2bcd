"""The time a memory search's question names, as a range of dates.

"What did I do in May 2023?", "Where did Jon hike last year?", "我去年去了哪里": the
question asks about a period, and the memories dated in it (when the fact was true, else
when it was stored) are the likelier answers, whatever their words. Pure and
deterministic, no model; recognised (English and Chinese):

- a day ("on 8 May 2023", "May 8, 2023", "2023年5月8日");
- a month with its year ("in May 2023", "2023年5月"), a month alone ("in May", "5月":
  the latest such month that has begun by ``now``), a year ("in 2023", "2023年");
- relative to ``now``: "last year" / "去年", "this year" / "今年", "last month" / "上个月",
  "this month" / "这个月" / "本月".

Words that point at a time only the conversation knows ("then", "当时", "that day") are
not read: a single question does not say when they were.
"""

from __future__ import annotations

import calendar
import datetime
import re

_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_EN_MONTH = "|".join(_MONTHS)
# "in May 2023", "in May", "during March", "May of 2022"
_EN_MONTH_YEAR = re.compile(rf"\b(?:in|during)\s+({_EN_MONTH})(?:\s+(?:of\s+)?(\d{{4}}))?\b")
_EN_DAY = re.compile(
    rf"\b(\d{{1,2}})\s+({_EN_MONTH})\s+(\d{{4}})\b|\b({_EN_MONTH})\s+(\d{{1,2}}),?\s+(\d{{4}})\b"
)
_ZH_DAY = re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})[日号]")
_EN_YEAR = re.compile(r"\b(?:in|during)\s+((?:19|20)\d{2})\b")
_EN_RELATIVE = re.compile(r"\b(last|this|past)\s+(year|month)\b")
_ZH_MONTH = re.compile(r"(?:(\d{4})年)?(\d{1,2})月(?!\d{1,2}[日号])")
_ZH_YEAR = re.compile(r"(\d{4})年(?!\d{1,2}月)")
_ZH_RELATIVE = {"去年": (-1, "year"), "今年": (0, "year"), "上个月": (-1, "month"),
                "这个月": (0, "month"), "本月": (0, "month")}  # fmt: skip


def dates_in(text: str) -> list[float]:
    """The days ``text`` names in full ("on 8 May 2023", "2023年5月8日"), as the epoch
    seconds (UTC) of their start."""
    days = []
    for m in _EN_DAY.finditer(text.casefold()):
        day, month, year = (
            (m.group(1), m.group(2), m.group(3))
            if m.group(1)
            else (m.group(5), m.group(4), m.group(6))
        )
        days.append(_day_range(int(year), _MONTHS.index(month) + 1, int(day)))
    days += [_day_range(*(int(g) for g in m.groups())) for m in _ZH_DAY.finditer(text)]
    return [d[0] for d in days if d is not None]


def _month_range(year: int, month: int) -> tuple[float, float]:
    start = calendar.timegm((year, month, 1, 0, 0, 0))
    end_year, end_month = (year + 1, 1) if month == 12 else (year, month + 1)
    return float(start), float(calendar.timegm((end_year, end_month, 1, 0, 0, 0)))


def _day_range(year: int, month: int, day: int) -> tuple[float, float] | None:
    try:
        start = calendar.timegm(datetime.date(year, month, day).timetuple())
    except ValueError:  # 31 February
        return None
    return float(start), float(start + 86400)


def _year_range(year: int) -> tuple[float, float]:
    return float(calendar.timegm((year, 1, 1, 0, 0, 0))), float(
        calendar.timegm((year + 1, 1, 1, 0, 0, 0))
    )


def _latest(month: int, today: datetime.date) -> tuple[float, float]:
    """The latest ``month`` that has begun by ``today``."""
    year = today.year if month <= today.month else today.year - 1
    return _month_range(year, month)


def _relative(offset: int, unit: str, today: datetime.date) -> tuple[float, float]:
    if unit == "year":
        return _year_range(today.year + offset)
    month = today.month + offset
    year = today.year
    if month < 1:
        month, year = month + 12, year - 1
    return _month_range(year, month)


def asked_period(question: str, now: float) -> tuple[float, float] | None:
    """The range [start, end) in epoch seconds (UTC) that ``question`` asks about, or
    None when it names no period (or only one that needs the conversation)."""
    text = question.casefold()
    today = datetime.datetime.fromtimestamp(now, datetime.UTC).date()
    if m := _EN_DAY.search(text):
        day, month, year = (
            (m.group(1), m.group(2), m.group(3))
            if m.group(1)
            else (m.group(5), m.group(4), m.group(6))
        )
        return _day_range(int(year), _MONTHS.index(month) + 1, int(day))
    if m := _ZH_DAY.search(question):
        return _day_range(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if m := _EN_MONTH_YEAR.search(text):
        month = _MONTHS.index(m.group(1)) + 1
        return _month_range(int(m.group(2)), month) if m.group(2) else _latest(month, today)
    if m := _EN_YEAR.search(text):
        return _year_range(int(m.group(1)))
    if m := _EN_RELATIVE.search(text):
        return _relative(0 if m.group(1) == "this" else -1, m.group(2), today)
    if m := _ZH_MONTH.search(question):
        month = int(m.group(2))
        if 1 <= month <= 12:
            return _month_range(int(m.group(1)), month) if m.group(1) else _latest(month, today)
    if m := _ZH_YEAR.search(question):
        return _year_range(int(m.group(1)))
    for word, (offset, unit) in _ZH_RELATIVE.items():
        if word in question:
            return _relative(offset, unit, today)
    return None

"""The period a memory search's question names."""

from __future__ import annotations

import calendar

import pytest
from contextd.core.query_time import asked_period, dates_in

NOW = calendar.timegm((2024, 3, 10, 12, 0, 0))


def day(year: int, month: int, d: int) -> float:
    return float(calendar.timegm((year, month, d, 0, 0, 0)))


@pytest.mark.parametrize(
    ("question", "period"),
    [
        ("What did I do in May 2023?", (day(2023, 5, 1), day(2023, 6, 1))),
        ("Where did Jon hike during December of 2022?", (day(2022, 12, 1), day(2023, 1, 1))),
        # A month alone: the latest that has begun (March is this month, May last year's).
        ("Where did Jon hike in May?", (day(2023, 5, 1), day(2023, 6, 1))),
        ("What did I buy in March?", (day(2024, 3, 1), day(2024, 4, 1))),
        ("What did I read in 2022?", (day(2022, 1, 1), day(2023, 1, 1))),
        ("Where did I travel last year?", (day(2023, 1, 1), day(2024, 1, 1))),
        ("What did I start this year?", (day(2024, 1, 1), day(2025, 1, 1))),
        ("Which film did I see last month?", (day(2024, 2, 1), day(2024, 3, 1))),
        ("What happened on 8 May 2023?", (day(2023, 5, 8), day(2023, 5, 9))),
        ("What happened on May 8, 2023?", (day(2023, 5, 8), day(2023, 5, 9))),
        ("2023年5月我做了什么", (day(2023, 5, 1), day(2023, 6, 1))),
        ("5月我去了哪里", (day(2023, 5, 1), day(2023, 6, 1))),
        ("2022年我在哪里工作", (day(2022, 1, 1), day(2023, 1, 1))),
        ("我去年去了哪里", (day(2023, 1, 1), day(2024, 1, 1))),
        ("上个月我看了什么电影", (day(2024, 2, 1), day(2024, 3, 1))),
        ("2023年5月8日我在哪", (day(2023, 5, 8), day(2023, 5, 9))),
    ],
)
def test_a_named_period(question: str, period: tuple[float, float]) -> None:
    assert asked_period(question, NOW) == period


@pytest.mark.parametrize(
    "question",
    [
        "What do I eat?",
        "I may go to the party",  # "may", not May
        "当时我在哪里",  # a time only the conversation knows
        "What happened on 31 February 2023?",
        "13月我去了哪里",
    ],
)
def test_no_period(question: str) -> None:
    assert asked_period(question, NOW) is None


def test_the_days_a_memory_names() -> None:
    assert dates_in("Calvin gave a talk on 6 February 2023 and on March 3, 2024.") == [
        day(2023, 2, 6),
        day(2024, 3, 3),
    ]
    assert dates_in("2026年8月12日用户和郭嘉一起去爬山") == [day(2026, 8, 12)]
    assert dates_in("no date here") == []

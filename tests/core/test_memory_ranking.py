"""How a memory search ranks the memories found by terms and by meaning together."""

from __future__ import annotations

import calendar

import pytest
from contextd.core.memory_ranking import (
    RECENCY_SHARE,
    Candidate,
    Ranked,
    about_the_user,
    rank_hybrid,
)

DAY = 86400.0
NOW = 1_800_000_000.0
HALF_LIFE = 30 * DAY
FLOOR = 0.1


def ranked(query: str, candidates: list[Candidate], limit: int = 10) -> list[Ranked]:
    return rank_hybrid(query, candidates, unseen=FLOOR, now=NOW, half_life=HALF_LIFE, limit=limit)


def rank(query: str, *candidates: Candidate, limit: int = 10) -> list[int]:
    found = ranked(query, list(candidates), limit)
    return [r.id for r in found]


def memory(
    mid: int, text: str, cosine: float | None, *, days: float = 0, terms: float = 0.0
) -> Candidate:
    return Candidate(mid, text, NOW - days * DAY, terms, cosine)


def test_age_does_not_outweigh_meaning() -> None:
    """The memory that answers, found first by meaning, stays first when every other
    candidate is newer: recency in the fused score used to weigh a quarter, so that
    memories a month apart swapped places over any difference in meaning (a search of
    dated memories lost most of what the model alone found)."""
    answer = memory(1, "I have been vegetarian for years.", 0.55, days=400)
    newer = [
        memory(10 + i, f"On day {i} I went hiking with Oscar.", 0.30 - i / 100, days=i)
        for i in range(8)
    ]
    assert rank("Do I eat meat?", *newer, answer)[0] == 1
    for r in ranked("Do I eat meat?", [*newer, answer]):
        assert r.relevance * (1 - RECENCY_SHARE) <= r.score <= r.relevance


def test_recency_breaks_near_ties() -> None:
    old = memory(1, "I live in Leeds.", 0.50, days=300)
    new = memory(2, "I live in York.", 0.49, days=2)
    assert rank("Where do I live?", old, new) == [2, 1]
    far = memory(3, "I live in Ghent.", 0.40, days=0)
    assert rank("Where do I live?", old, far) == [1, 3]


def test_a_question_about_the_user_prefers_the_users_own_facts() -> None:
    mine = memory(1, "I work as a nurse at the regional hospital.", 0.42)
    friends = memory(2, "Oscar works as a nurse at the regional hospital.", 0.50)
    assert rank("What is my profession?", mine, friends) == [1, 2]
    assert rank("What is Oscar's profession?", mine, friends) == [2, 1]
    mine_zh = memory(3, "用户在市立医院当护士", 0.42)
    friends_zh = memory(4, "王芳在市立医院当护士", 0.50)
    assert rank("我从事什么职业", mine_zh, friends_zh) == [3, 4]


def test_shared_terms_break_near_ties_but_do_not_outrank_meaning() -> None:
    closer = memory(1, "I commute by bicycle unless it snows.", 0.60)
    shares_a_word = memory(2, "My partner works night shifts.", 0.30, terms=1.0)
    assert rank("How do I get to work?", closer, shares_a_word) == [1, 2]
    tied = memory(3, "I cycle to work every day.", 0.59, terms=1.0)
    assert rank("How do I get to work?", closer, tied) == [3, 1]


def test_a_memory_found_by_terms_only_counts_as_close_as_the_floor() -> None:
    by_meaning = [memory(i, f"I like fact {i}.", c) for i, c in enumerate((0.4, 0.3, 0.12), 1)]
    by_terms_only = memory(9, "I like tea with milk.", None, terms=1.0)
    order = rank("Do I like tea?", *by_meaning, by_terms_only)
    assert order.index(9) == 2  # the floor (0.1) and a full term match: between 0.3 and 0.12


def test_relevance_is_relative_to_the_best() -> None:
    found = ranked(
        "coffee?", [memory(1, "I drink coffee.", 0.8), memory(2, "I drink tea.", 0.4)], 1
    )
    assert [(r.id, r.relevance) for r in found] == [(1, 1.0)]
    assert found[0].score == pytest.approx(1.0)
    assert rank("x", limit=3) == []


@pytest.mark.parametrize(
    ("text", "question", "expected"),
    [
        ("What is my job?", True, True),
        ("Where do I live?", True, True),
        ("I'm vegan", False, True),
        ("What does Oscar do?", True, False),
        ("Oscar works as a nurse.", False, False),
        ("我从事什么职业", True, True),
        ("用户在市立医院当护士", False, True),
        ("王芳在青岛当牙医", False, False),
        ("用户喜欢什么", True, False),  # a question about "the user" is a host's, not the user's
    ],
)
def test_about_the_user(text: str, question: bool, expected: bool) -> None:
    assert about_the_user(text, question=question) is expected


def test_a_period_the_question_names_favours_the_memories_dated_in_it() -> None:
    """ "Where did Jon hike in May?": May's hike, told as "last weekend", comes before a
    hike of another month that is a little closer in meaning."""
    may = Candidate(1, "Jon hiked a trail last weekend.", NOW, 0.0, 0.40, dated_at=NOW - 300 * DAY)
    june = Candidate(2, "Jon went hiking at Lake Tahoe.", NOW, 0.0, 0.45, dated_at=NOW - 270 * DAY)
    named = Candidate(3, "Jon went hiking on 8 May 2023.", NOW, 0.0, 0.30, dated_at=NOW)
    query = "Where did Jon hike in May?"
    assert rank(query, may, june) == [2, 1]  # without a period: by meaning
    period = (NOW - 310 * DAY, NOW - 290 * DAY)
    found = rank_hybrid(
        query, [may, june], unseen=FLOOR, now=NOW, half_life=HALF_LIFE, limit=5, period=period
    )
    assert [r.id for r in found] == [1, 2]
    may_2023 = (calendar.timegm((2023, 5, 1, 0, 0, 0)), calendar.timegm((2023, 6, 1, 0, 0, 0)))
    found = rank_hybrid(
        query, [june, named], unseen=FLOOR, now=NOW, half_life=HALF_LIFE, limit=5, period=may_2023
    )
    assert [r.id for r in found] == [3, 2]  # the day it names, not when it was stored


def test_the_cosine_without_the_names_counts_half() -> None:
    """Every memory of Melanie is close to a question naming her: the rest of the
    question decides."""
    violin = Candidate(1, "Melanie has been learning to play the violin.", NOW, 0.0, 0.30, 0, 0.40)
    talk = Candidate(2, "Melanie talked about a delayed train.", NOW, 0.0, 0.34, 0, 0.10)
    assert rank("Would Melanie enjoy a chamber music concert?", violin, talk) == [1, 2]
    plain = [Candidate(c.id, c.text, c.updated_at, 0.0, c.cosine) for c in (violin, talk)]
    assert rank("Would Melanie enjoy a chamber music concert?", *plain) == [2, 1]

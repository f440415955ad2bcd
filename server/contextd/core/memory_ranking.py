"""How a memory search ranks the memories found by terms and by meaning together.

Pure functions, no I/O: the store hands over every candidate (found by the term index,
by its vector, or both) and gets the ranking back.

A candidate's evidence, added up:

- its cosine with the query (the embedding model's judgement of meaning; a memory found
  by terms only, outside the closest ones, counts as ``unseen``: the meaning ranking's
  floor, below which it leaves memories out);
- ``TERM_WEIGHT`` x its term relevance (bm25 divided by the query's best, 0 if none):
  shared words (a name, a number the model reads poorly) break the model's near ties,
  without letting a memory that merely shares a common word ("work", "我的") push aside
  one that answers: on the benchmark, 0.05 cost nothing and 0.2 cost current values;
- ``SELF_WEIGHT`` when the question is about the user (I, my, 我...) and the memory is in
  the user's own voice (I, my, 用户...): "What is my job?" asks for the user's job, not
  for the job of a friend the user once spoke of, and the model reads both as close;
- ``PERIOD_WEIGHT`` when the question names a period ("in May 2023", "last year", "去年":
  core/query_time.py) and the memory is dated in it (when it was true, else when it was
  stored) or names a day in it: "Where did Jon hike in May?" asks for May's hike, and
  a memory told in May may say only "last weekend".

When the question names someone ("Would Melanie enjoy a concert?"), the cosine is the
mean of the query's and that of the query without its names (``name_free_cosine``): in
memories of a conversation nearly every fact names one of its two speakers, and the name
pulls every memory of that person equally close, so the rest of the question is what
tells them apart.

``relevance`` is that sum divided by the best candidate's (1.0 = the best). Recency
only breaks near ties: ``score = relevance x (1 - RECENCY_SHARE + RECENCY_SHARE x
recency)``, so a memory's age moves its score by at most 5 %. (The score of term-only
search, ``0.75 x relevance + 0.25 x recency``, would let a month's age outweigh the
difference between the first and the tenth memory by meaning.) The weights were chosen
on bench/memory_recall.py's labelled set (bench/README.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from contextd.core.query_time import dates_in

TERM_WEIGHT = 0.05
SELF_WEIGHT = 0.1
PERIOD_WEIGHT = 0.2
NAME_FREE_SHARE = 0.5
RECENCY_SHARE = 0.05

# The user speaking of themselves: English first-person words; in Chinese, 我 in a
# question and 用户 ("the user", as facts about the user are written) or 我 in a memory.
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|we|our|ours|us)\b")
_QUESTION_SELF = ("我",)
_MEMORY_SELF = ("用户", "我")


@dataclass(frozen=True, slots=True)
class Candidate:
    id: int
    text: str
    updated_at: float
    term_relevance: float  # bm25 / the query's best, 0 when not found by terms
    cosine: float | None  # None: not among the memories closest in meaning
    dated_at: float = 0.0  # when the fact was true (valid_from), else when it was stored
    # The cosine with the query without the names it holds; None: the same as ``cosine``
    # (the query names no one, or the memory has no vector).
    name_free_cosine: float | None = None


@dataclass(frozen=True, slots=True)
class Ranked:
    id: int
    score: float
    relevance: float
    recency: float


def about_the_user(text: str, *, question: bool) -> bool:
    """True when ``text`` speaks of the user: first-person words, or in Chinese 我 (a
    question) or 用户 / 我 (a memory)."""
    folded = text.replace("\u2019", "'").lower()
    if _FIRST_PERSON.search(folded):
        return True
    return any(mark in text for mark in (_QUESTION_SELF if question else _MEMORY_SELF))


def in_period(candidate: Candidate, period: tuple[float, float]) -> bool:
    """Whether the memory is dated in ``period`` or names a day in it."""
    start, end = period
    if start <= candidate.dated_at < end:
        return True
    return any(start <= day < end for day in dates_in(candidate.text))


def rank_hybrid(
    query: str,
    candidates: Sequence[Candidate],
    *,
    unseen: float,
    now: float,
    half_life: float,
    limit: int,
    period: tuple[float, float] | None = None,
) -> list[Ranked]:
    """The best ``limit`` candidates, best first (ties: the newer memory, then the
    higher id). ``unseen``: the cosine a candidate without one counts as; ``half_life``
    in seconds; ``period``: the [start, end) the question names (core/query_time.py)."""
    if not candidates or limit < 1:
        return []
    about_user = about_the_user(query, question=True)
    evidence = {}
    for c in candidates:
        cosine = unseen if c.cosine is None else c.cosine
        if c.name_free_cosine is not None:
            cosine += NAME_FREE_SHARE * (c.name_free_cosine - cosine)
        value = cosine + TERM_WEIGHT * c.term_relevance
        if about_user and about_the_user(c.text, question=False):
            value += SELF_WEIGHT
        if period is not None and in_period(c, period):
            value += PERIOD_WEIGHT
        evidence[c.id] = value
    best = max(evidence.values())
    ranked = []
    for c in candidates:
        relevance = max(0.0, evidence[c.id] / best) if best > 0 else 0.0
        recency = 0.5 ** (max(0.0, now - c.updated_at) / half_life)
        score = relevance * (1.0 - RECENCY_SHARE + RECENCY_SHARE * recency)
        ranked.append((Ranked(c.id, score, relevance, recency), c.updated_at))
    ranked.sort(key=lambda r: (-r[0].score, -r[1], -r[0].id))
    return [r for r, _ in ranked[:limit]]

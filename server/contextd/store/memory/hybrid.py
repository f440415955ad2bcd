"""Memory search by terms and by meaning together (MemoryRepo.search with a ranker set).

The term ranking is today's index search (store/memory/repository.py), ordered by its
text relevance; the vector ranking is the user's memories closest in meaning to the query
(a :class:`MeaningRanker`, which the application layer makes from an embedding provider).
They are ranked together by core/memory_ranking.py (the weights, and why recency only
breaks near ties there). When the ranker cannot rank (the provider failed or timed out),
the term results stand alone and the note says why.

A second hop follows the names the best memories found mention and the question does
not (core/memory_bridge.py): "What does my sister do?" finds "My sister is called Emily",
and the memory of Emily's closest in meaning to the question ("Emily works as a dentist
in Leeds", which shares nothing with it) goes right after the memory that named her. The
memories above that one keep their places; a name is followed through the term index
(the memories that mention it, ``Named``) and ranked by their cosines with the question
asked of the person (one more embedding; the question's own cosines, which the meaning
ranking computed for every memory anyway, when that fails).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from contextd.core.memory_bridge import (
    BRIDGE_FROM,
    NAMED_LOOKED_AT,
    bridge_names,
    hop_question,
    rank_named,
)
from contextd.core.memory_ranking import Candidate, rank_hybrid
from contextd.core.query_time import asked_period
from contextd.store.engine.database import Connection
from contextd.store.memory.index import MEMORY_COLUMNS
from contextd.store.models import Memory, ScoredMemory

Owner = tuple[str, str]  # (tenant id, user id)
# The owner's memories (meeting the search's filter) that mention a name, at most this
# many; none when the name is in too many of them to be a bridge.
Named = Callable[[str, int], Awaitable[Sequence[ScoredMemory]]]


@dataclass(frozen=True, slots=True)
class MeaningRanking:
    """(memory id, similarity) best first; ``note`` says why it is empty when it failed;
    ``floor``: the similarity below which a memory is left out of ``hits``."""

    hits: Sequence[tuple[int, float]] = ()
    note: str = ""
    floor: float = 0.0
    # The cosine with the query of any of the owner's memories (by id) that has a vector
    # and meets the search's filter; None when nothing was ranked.
    cosines: Callable[[Sequence[int]], dict[int, float]] | None = None
    # The cosines of memories (by id) with the query without the names it holds; None
    # when it names no one (core/memory_ranking.py).
    name_free: Callable[[Sequence[int]], Awaitable[dict[int, float]]] | None = None
    # The cosines of memories (by id) with another text (the second hop's question).
    asked: Callable[[str, Sequence[int]], Awaitable[dict[int, float]]] | None = None


@dataclass(frozen=True, slots=True)
class MemorySearchResult:
    found: list[ScoredMemory] = field(default_factory=list)
    # Why the results are by terms only although search by meaning is on ("" otherwise).
    note: str = ""


class MeaningRanker(Protocol):
    async def rank(
        self,
        owner: Owner,
        query: str,
        count: int,
        purpose: Literal["query", "document"] = ...,
        *,
        allowed: Set[int] | Awaitable[Set[int]] | None = ...,
    ) -> MeaningRanking:
        """The owner's memories closest in meaning to ``query`` (a search's query, or a
        new fact compared with the memories: a "document"), among ``allowed`` when given
        (or once read: awaited after the query's embedding); never raises for a provider
        failure (an empty ranking with a note instead)."""
        ...


@dataclass(frozen=True, slots=True)
class Fusion:
    """Whose memories, the query, how many results, and recency's half-life (seconds)."""

    owner: Owner
    query: str
    limit: int
    now: float
    half_life: float


async def hybrid_search(
    reader: Connection,
    ranking: Awaitable[MeaningRanking],
    by_terms: Sequence[ScoredMemory],
    fusion: Fusion,
    where: tuple[str, dict[str, Any]],
    from_row: Callable[[Any], Memory],
    named: Named | None = None,
) -> MemorySearchResult:
    """Fuse the term results with the meaning ranking; memories only the latter found are
    read here, the owner's only, and only those that meet ``where`` (a condition on alias
    ``m`` and its parameters, store/memory/filters.py): a deleted one, another user's, a
    superseded or expired one is left out."""
    by_meaning = await ranking
    rows = {s.memory.id: s.memory for s in by_terms}
    missing = [mid for mid, _ in by_meaning.hits if mid not in rows]
    if missing:
        # By id, owner checked here: with the owner in the statement, a planner with
        # stale statistics may read all of the user's rows instead.
        condition, params = where
        found = await reader.execute_fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories AS m"
            f" WHERE m.id IN (SELECT CAST(value AS BIGINT) FROM json_each(:ids)) AND {condition}",
            {**params, "ids": json.dumps(missing)},
        )
        for row in found:
            memory = from_row(row)
            if (memory.tenant_id, memory.user_id) == fusion.owner:
                rows[memory.id] = memory
    name_free = None
    if by_meaning.name_free is not None and by_meaning.hits:
        name_free = await by_meaning.name_free(list(rows))
    found = fuse(by_terms, by_meaning.hits, rows, fusion, by_meaning.floor, name_free)
    if named is not None and by_meaning.cosines is not None:
        by_words = {s.memory.id for s in by_terms}
        found = await second_hop(found, by_words, by_meaning, fusion, named)
    return MemorySearchResult(found, by_meaning.note)


async def second_hop(
    found: list[ScoredMemory],
    by_words: Set[int],
    by_meaning: MeaningRanking,
    fusion: Fusion,
    named: Named,
) -> list[ScoredMemory]:
    """``found`` with, right after each of its best memories that shares a word with the
    question (``by_words``: found by its terms) and names someone the question does not,
    the memories of that name closest to the question asked of the person
    (core/memory_bridge.py; by the question's own cosines when that cannot be embedded),
    unless already among the results above them."""
    best = [s for s in found[:BRIDGE_FROM] if s.memory.id in by_words]
    result = list(found)
    for name, index in bridge_names(fusion.query, [s.memory.content for s in best]):
        bridge = best[index].memory.id
        at = next(i for i, s in enumerate(result) if s.memory.id == bridge)
        above = {s.memory.id for s in result[: at + 1]}
        mentions = [s.memory for s in await named(name, NAMED_LOOKED_AT)]
        ids = [m.id for m in mentions if m.id not in above]
        close = await _asked_of(
            by_meaning, hop_question(fusion.query, best[index].memory.content, name), ids
        )
        hops = rank_named(name, [(m.id, m.content, m.updated_at) for m in mentions], close)
        by_id = {m.id: m for m in mentions}
        for offset, mid in enumerate(hops, start=1):
            hop = by_id[mid]
            result = [s for s in result if s.memory.id != mid]
            # Scored between its neighbours, so the results stay best first.
            before = result[at + offset - 1]
            after = result[at + offset] if at + offset < len(result) else None
            score = before.score if after is None else (before.score + after.score) / 2
            relevance = (
                before.relevance if after is None else (before.relevance + after.relevance) / 2
            )
            recency = 0.5 ** (max(0.0, fusion.now - hop.updated_at) / fusion.half_life)
            scored = ScoredMemory(hop, score, relevance, recency, cosine=close.get(mid))
            result.insert(at + offset, scored)
    return result[: fusion.limit]


async def _asked_of(
    by_meaning: MeaningRanking, question: str, ids: Sequence[int]
) -> dict[int, float]:
    assert by_meaning.cosines is not None
    if by_meaning.asked is not None and ids:
        close = await by_meaning.asked(question, ids)
        if close:
            return close
    return by_meaning.cosines(ids)


def fuse(
    by_terms: Sequence[ScoredMemory],
    by_meaning: Sequence[tuple[int, float]],
    rows: dict[int, Memory],
    fusion: Fusion,
    floor: float = 0.0,
    name_free: Mapping[int, float] | None = None,
) -> list[ScoredMemory]:
    """The ranking of both lists (``rows``: every memory either names; ``floor``: the
    meaning ranking's; ``name_free``: cosines with the query without its names), by
    core/memory_ranking.py; the term results as they are when nothing ranked by meaning."""
    if not by_meaning:
        return list(by_terms[: fusion.limit])
    relevance = {s.memory.id: s.relevance for s in by_terms}
    cosine = dict(by_meaning)
    free = name_free or {}
    candidates = [
        Candidate(
            mid,
            memory.content,
            memory.updated_at,
            relevance.get(mid, 0.0),
            cosine.get(mid),
            memory.created_at if memory.valid_from is None else memory.valid_from,
            free.get(mid),
        )
        for mid, memory in rows.items()
    ]
    ranked = rank_hybrid(
        fusion.query,
        candidates,
        unseen=floor,
        now=fusion.now,
        half_life=fusion.half_life,
        limit=fusion.limit,
        period=asked_period(fusion.query, fusion.now),
    )
    return [
        ScoredMemory(
            rows[r.id], r.score, r.relevance, r.recency, relevance.get(r.id), cosine.get(r.id)
        )
        for r in ranked
    ]

"""Memory search by terms and by meaning together (MemoryRepo.search with a ranker set).

The term ranking is today's index search (store/memory/repository.py), ordered by its
text relevance; the vector ranking is the user's memories closest in meaning to the query
(a :class:`MeaningRanker`, which the application layer makes from an embedding provider).
They are ranked together by core/memory_ranking.py (the weights, and why recency only
breaks near ties there). When the ranker cannot rank (the provider failed or timed out),
the term results stand alone and the note says why.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from contextd.core.memory_ranking import Candidate, rank_hybrid
from contextd.store.engine.database import Connection
from contextd.store.memory.index import MEMORY_COLUMNS
from contextd.store.models import Memory, ScoredMemory

Owner = tuple[str, str]  # (tenant id, user id)


@dataclass(frozen=True, slots=True)
class MeaningRanking:
    """(memory id, similarity) best first; ``note`` says why it is empty when it failed;
    ``floor``: the similarity below which a memory is left out of ``hits``."""

    hits: Sequence[tuple[int, float]] = ()
    note: str = ""
    floor: float = 0.0


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
        allowed: Set[int] | None = ...,
    ) -> MeaningRanking:
        """The owner's memories closest in meaning to ``query`` (a search's query, or a
        new fact compared with the memories: a "document"), among ``allowed`` when given;
        never raises for a provider failure (an empty ranking with a note instead)."""
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
    found = fuse(by_terms, by_meaning.hits, rows, fusion, by_meaning.floor)
    return MemorySearchResult(found, by_meaning.note)


def fuse(
    by_terms: Sequence[ScoredMemory],
    by_meaning: Sequence[tuple[int, float]],
    rows: dict[int, Memory],
    fusion: Fusion,
    floor: float = 0.0,
) -> list[ScoredMemory]:
    """The ranking of both lists (``rows``: every memory either names; ``floor``: the
    meaning ranking's), by core/memory_ranking.py; the term results as they are when
    nothing ranked by meaning."""
    if not by_meaning:
        return list(by_terms[: fusion.limit])
    relevance = {s.memory.id: s.relevance for s in by_terms}
    cosine = dict(by_meaning)
    candidates = [
        Candidate(mid, memory.content, memory.updated_at, relevance.get(mid, 0.0), cosine.get(mid))
        for mid, memory in rows.items()
    ]
    ranked = rank_hybrid(
        fusion.query,
        candidates,
        unseen=floor,
        now=fusion.now,
        half_life=fusion.half_life,
        limit=fusion.limit,
    )
    return [ScoredMemory(rows[r.id], r.score, r.relevance, r.recency) for r in ranked]

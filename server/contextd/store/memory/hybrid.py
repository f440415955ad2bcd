"""Memory search by terms and by meaning together (MemoryRepo.search with a ranker set).

The term ranking is today's index search (store/memory/repository.py), ordered by its
text relevance; the vector ranking is the user's memories closest in meaning to the query
(a :class:`MeaningRanker`, which the application layer makes from an embedding provider).
They are fused by reciprocal rank (core/rank_fusion.py); a memory's ``relevance`` is its
fused score divided by the best one (1.0 = the best), and its ``score`` weighs relevance
and recency as term search does. When the ranker cannot rank (the provider failed or
timed out), the term results stand alone and the note says why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from contextd.core.rank_fusion import reciprocal_rank_fusion
from contextd.store.engine.database import Connection
from contextd.store.memory.index import MEMORY_COLUMNS
from contextd.store.models import Memory, ScoredMemory

Owner = tuple[str, str]  # (tenant id, user id)


@dataclass(frozen=True, slots=True)
class MeaningRanking:
    """(memory id, similarity) best first; ``note`` says why it is empty when it failed."""

    hits: Sequence[tuple[int, float]] = ()
    note: str = ""


@dataclass(frozen=True, slots=True)
class MemorySearchResult:
    found: list[ScoredMemory] = field(default_factory=list)
    # Why the results are by terms only although search by meaning is on ("" otherwise).
    note: str = ""


class MeaningRanker(Protocol):
    async def rank(
        self, owner: Owner, query: str, count: int, purpose: Literal["query", "document"] = ...
    ) -> MeaningRanking:
        """The owner's memories closest in meaning to ``query`` (a search's query, or a
        new fact compared with the memories: a "document"); never raises for a provider
        failure (an empty ranking with a note instead)."""
        ...


@dataclass(frozen=True, slots=True)
class Fusion:
    """Whose memories, how many results, and the recency rule (as term search has it)."""

    owner: Owner
    limit: int
    now: float
    half_life: float
    weight: float


async def hybrid_search(
    reader: Connection,
    ranking: Awaitable[MeaningRanking],
    by_terms: Sequence[ScoredMemory],
    fusion: Fusion,
    from_row: Callable[[Any], Memory],
) -> MemorySearchResult:
    """Fuse the term results with the meaning ranking; memories only the latter found are
    read here, the owner's only (a deleted one, or another user's, is left out)."""
    by_meaning = await ranking
    rows = {s.memory.id: s.memory for s in by_terms}
    missing = [mid for mid, _ in by_meaning.hits if mid not in rows]
    if missing:
        # By id alone, owner checked here: with the owner in the statement, a planner
        # with stale statistics may read all of the user's rows instead.
        found = await reader.execute_fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ({', '.join('?' * len(missing))})",
            missing,
        )
        for row in found:
            memory = from_row(row)
            if (memory.tenant_id, memory.user_id) == fusion.owner:
                rows[memory.id] = memory
    return MemorySearchResult(fuse(by_terms, by_meaning.hits, rows, fusion), by_meaning.note)


def fuse(
    by_terms: Sequence[ScoredMemory],
    by_meaning: Sequence[tuple[int, float]],
    rows: dict[int, Memory],
    fusion: Fusion,
) -> list[ScoredMemory]:
    """The fused ranking of both lists (``rows``: every memory either names)."""
    term_order = sorted(by_terms, key=lambda s: -s.relevance)
    fused = reciprocal_rank_fusion(
        [[s.memory.id for s in term_order], [mid for mid, _ in by_meaning]]
    )
    fused = {mid: value for mid, value in fused.items() if mid in rows}
    if not fused:
        return []
    best = max(fused.values())
    scored = []
    for mid, value in fused.items():
        memory = rows[mid]
        relevance = value / best
        recency = 0.5 ** (max(0.0, fusion.now - memory.updated_at) / fusion.half_life)
        score = (1.0 - fusion.weight) * relevance + fusion.weight * recency
        scored.append(ScoredMemory(memory, score, relevance, recency))
    scored.sort(key=lambda s: (-s.score, -s.memory.updated_at, -s.memory.id))
    return scored[: fusion.limit]

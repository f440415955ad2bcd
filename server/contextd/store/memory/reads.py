"""Reading a user's memories: one by id, a page of them, a search; and the search index
kept in step with the terms version. MemoryRepo (repository.py) adds the writes.

Search goes through an index of the terms made by ``contextd.core.search_terms``, each
keyed by its user, one per engine, which store/open.py picks (store/memory/fts5_index.py:
SQLite FTS5, migration 0002_memories.sql for the layout and why; tsvector_index.py: a
PostgreSQL column). A search:

1. turns the query into terms and looks up, in one read, how many of the user's memories
   contain each; terms no memory contains are dropped, and if none is
   left the answer is [] without touching the index again;
2. keeps the rarest terms while their memories add up to at most ``max_ranked`` (the rarest
   term is always kept), so a query that also contains a very common term ("我的", "喜欢")
   does not rank tens of thousands of rows; if even the rarest term is that common, only its
   ``max_ranked`` newest memories are ranked;
3. ranks them in one statement: a text relevance (SQLite: bm25, PostgreSQL: ts_rank) for
   every memory matched by the OR of those terms, then, for the ``5 * limit`` best of them
   by it and the ``5 * limit`` newest (by id; at least 50 of each),
   ``score = (1 - w) * relevance + w * recency``, where relevance is the text relevance
   divided by the best one of this query (1.0 = the best match, 0 < relevance <= 1) and
   recency is ``0.5 ** (age / half_life)`` of ``updated_at`` (1.0 = now). Ties go to the
   newer memory. With fewer matches than that every match is scored; with more, a memory
   neither among the best text matches nor among the newest is not scored (it could only
   have won through a recent ``updated_at``, i.e. by being stated again).

On SQLite a search is two statements in this process (the counts, then the ranking); on
PostgreSQL the three steps are one statement, one round trip.

Every read meets a filter (store/memory/filters.py): by default, the memories current now.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence

from contextd.core.identity import DEFAULT_TENANT
from contextd.core.memory_bridge import MAX_NAMED
from contextd.core.search_terms import TERMS_VERSION, content_hash, query_terms
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.store.engine.database import Connection, Database
from contextd.store.memory import index as memory_index
from contextd.store.memory.filters import CURRENT, MemoryFilter, conditions
from contextd.store.memory.hybrid import Fusion, MeaningRanker, MemorySearchResult, hybrid_search
from contextd.store.memory.index import (
    MEMORY_COLUMNS,
    MemoryIndex,
    Owner,
    TermQuery,
    memory_from_row,
)
from contextd.store.models import Memory, ScoredMemory
from contextd.store.paging import decode_token, encode_token, page_limit
from contextd.tracing import spans

DEFAULT_HALF_LIFE_DAYS = 30.0
DEFAULT_RECENCY_WEIGHT = 0.25
# At most this many matching memories are ranked per search (see the module docstring).
DEFAULT_MAX_RANKED = 2000
MAX_SEARCH_LIMIT = 100
# Memories scored per search: this many best text matches per result asked for, and as many
# newest matches (at least MIN_CANDIDATES of each).
CANDIDATES_PER_RESULT = 5
MIN_CANDIDATES = 50
# A search by terms and meaning together: this many memories per result from each
# ranking (at least HYBRID_MIN_CANDIDATES), fused. On bench/memory_recall.py 20 found
# what 50 did; each one more is a row read and ranked (bench/README.md).
HYBRID_CANDIDATES_PER_RESULT = 3
HYBRID_MIN_CANDIDATES = 30
_COLUMNS = MEMORY_COLUMNS


# Memoryless users remembered at most (the set is emptied when full).
WITHOUT_MEMORIES_KEPT = 100_000


class MemoryReads:
    """The reads of MemoryRepo, and the state they share with its writes."""

    def __init__(
        self,
        db: Database,
        index: MemoryIndex,
        *,
        half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
        recency_weight: float = DEFAULT_RECENCY_WEIGHT,
        max_ranked: int = DEFAULT_MAX_RANKED,
        metrics: Recorder = NULL_RECORDER,
        meaning: MeaningRanker | None = None,
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        """``index``: the search index of ``db``'s engine (store/open.py picks it).
        ``meaning`` and ``changed`` come from the application layer when an embedding
        provider is on (the store knows none): memory search by meaning too, and who to
        tell that memories need vectors."""
        self.metrics = metrics
        if not half_life_days > 0:
            raise ValueError("half_life_days must be > 0")
        if not 0.0 <= recency_weight <= 1.0:
            raise ValueError("recency_weight must be between 0 and 1")
        if max_ranked < 1:
            raise ValueError("max_ranked must be >= 1")
        self._db = db
        self.index = index
        self._half_life = half_life_days * 86400.0
        self._weight = recency_weight
        self._max_ranked = max_ranked
        self._index_checked = False
        self._index_lock = asyncio.Lock()
        # Users (tenant id, user id) found to have no memory at all: their searches need
        # no query. Only ``add`` and ``add_many`` give a user memories; each takes the user
        # out of it. Kept only when this process is the database's only writer.
        self._without_memories: set[tuple[str, str]] = set()
        self._remember_without = not db.shared_between_processes
        self.meaning = meaning
        self.changed = changed

    async def reindex(self) -> int:
        """Rebuild the search index from the memories; returns how many were indexed.

        Runs by itself when ``search_terms.TERMS_VERSION`` differs from the version that
        built the index.
        """
        async with self._db.transaction() as conn:
            count = await self._rebuild(conn)
        self._index_checked = True
        return count

    async def _rebuild(self, conn: Connection) -> int:
        # Memories a migration made from the memory history have no hash yet (SQL cannot
        # make one): made here, before the index is.
        unhashed = await conn.execute_fetchall(
            "SELECT id, content FROM memories WHERE content_hash = ''"
        )
        await conn.executemany(
            "UPDATE memories SET content_hash = ? WHERE id = ?",
            [(content_hash(row["content"]), row["id"]) for row in unhashed],
        )
        count = await self.index.rebuild(conn)
        await conn.execute(
            "UPDATE memories_fts_state SET terms_version = ? WHERE id = 1", (TERMS_VERSION,)
        )
        return count

    async def ensure_index(self) -> None:
        """Once per repository: rebuild the index if another terms version built it. Call
        it before a transaction that calls :meth:`rewrite` (it may write itself)."""
        if self._index_checked:
            return
        async with self._index_lock:
            if self._index_checked:
                return
            rows = list(
                await self._db.reader.execute_fetchall(
                    "SELECT terms_version FROM memories_fts_state WHERE id = 1"
                )
            )
            if not rows or rows[0]["terms_version"] != TERMS_VERSION:
                async with self._db.transaction() as conn:
                    again = list(
                        await conn.execute_fetchall(
                            "SELECT terms_version FROM memories_fts_state WHERE id = 1"
                        )
                    )
                    if not again:
                        await conn.execute(
                            "INSERT INTO memories_fts_state (id, terms_version) VALUES (1, 0)"
                        )
                    if not again or again[0]["terms_version"] != TERMS_VERSION:
                        await self._rebuild(conn)
            await self.index.prepare()
            self._index_checked = True

    # --- reads --------------------------------------------------------------------------

    async def get(self, memory_id: int, *, tenant_id: str = DEFAULT_TENANT) -> Memory | None:
        """The tenant's memory (None for another tenant's: the caller checks the user)."""
        rows = list(
            await self._db.reader.execute_fetchall(
                f"SELECT {_COLUMNS} FROM memories WHERE id = ? AND tenant_id = ?",
                (memory_id, tenant_id),
            )
        )
        return memory_from_row(rows[0]) if rows else None

    async def among(
        self, owner: Owner, ids: Sequence[int], memory_filter: MemoryFilter = CURRENT
    ) -> list[Memory]:
        """Those of these memories that are the owner's and meet the filter."""
        if not ids:
            return []
        where, params = conditions(memory_filter, time.time())
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_COLUMNS} FROM memories AS m WHERE m.id IN"
            " (SELECT CAST(value AS BIGINT) FROM json_each(:ids))"
            f" AND m.tenant_id = :tenant_id AND m.user_id = :user_id AND {where}",
            {**params, "ids": json.dumps(list(ids)), "tenant_id": owner[0], "user_id": owner[1]},
        )
        return [memory_from_row(row) for row in rows]

    async def count(self, user_id: str, *, tenant_id: str = DEFAULT_TENANT) -> int:
        rows = list(
            await self._db.reader.execute_fetchall(
                "SELECT COUNT(*) AS memories FROM memories WHERE tenant_id = ? AND user_id = ?",
                (tenant_id, user_id),
            )
        )
        return int(rows[0]["memories"])

    async def list_memories(
        self,
        user_id: str,
        page_size: int = 0,
        page_token: str = "",
        *,
        tenant_id: str = DEFAULT_TENANT,
        memory_filter: MemoryFilter = CURRENT,
        now: float | None = None,
    ) -> tuple[list[Memory], str]:
        """A page of the user's memories that meet the filter (by default those current),
        newest first, and the next page's token ("" at the end). ``page_size`` 0 means the
        default; a token from another listing is refused."""
        limit = page_limit(page_size)
        # A token is valid with the filter it was made with only.
        scope = user_id if memory_filter == CURRENT else f"{user_id}\n{memory_filter!r}"
        where, params = conditions(memory_filter, time.time() if now is None else now)
        params.update(tenant_id=tenant_id, user_id=user_id, limit=limit + 1)
        after = ""
        if page_token:
            created_at, last_id = decode_token(page_token, "memories", scope, (float, int))
            after = " AND (m.created_at, m.id) < (:created_at, :last_id)"
            params.update(created_at=created_at, last_id=last_id)
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_COLUMNS} FROM memories AS m WHERE m.tenant_id = :tenant_id"
            f" AND m.user_id = :user_id AND {where}{after}"
            " ORDER BY m.created_at DESC, m.id DESC LIMIT :limit",
            params,
        )
        memories = [memory_from_row(r) for r in rows]
        if len(memories) <= limit:
            return memories, ""
        memories = memories[:limit]
        last = memories[-1]
        return memories, encode_token("memories", scope, [last.created_at, last.id])

    async def search(
        self,
        user_id: str,
        query: str,
        limit: int = 10,
        now: float | None = None,
        *,
        tenant_id: str = DEFAULT_TENANT,
        memory_filter: MemoryFilter = CURRENT,
    ) -> list[ScoredMemory]:
        """The (tenant's) user's memories that meet the filter (by default those current)
        best matching ``query``, best first (see above).

        A query without usable terms (only punctuation, say) finds nothing; search syntax
        in it (quotes, ``*``, ``AND``, ``NEAR``, ``|``, parentheses) is plain text.
        """
        found = await self.search_noted(
            user_id, query, limit, now, tenant_id=tenant_id, memory_filter=memory_filter
        )
        return found.found

    async def search_noted(
        self,
        user_id: str,
        query: str,
        limit: int = 10,
        now: float | None = None,
        *,
        tenant_id: str = DEFAULT_TENANT,
        memory_filter: MemoryFilter = CURRENT,
        stored: bool | None = None,
    ) -> MemorySearchResult:
        """:meth:`search`, with a note when search by meaning is on but could not be used
        (store/memory/hybrid.py). ``stored``: False when the caller read, just before,
        that the user has no memory (store/sessions.py); nothing is read then."""
        started = time.perf_counter()
        owner = (tenant_id, user_id)
        at = time.time() if now is None else now
        f = memory_filter
        none = stored is False or owner in self._without_memories
        with spans.span("contextd.memory_search", {"contextd.memory.limit": limit}) as span:
            if self.meaning is None or limit < 1 or not user_id or none:
                found = await self._search(owner, query, limit, at, f, none=none)
                result = MemorySearchResult(found)
            else:
                limit = min(limit, MAX_SEARCH_LIMIT)
                count = max(HYBRID_MIN_CANDIDATES, HYBRID_CANDIDATES_PER_RESULT * limit)
                # The ids a narrowing filter allows are read while the query is embedded
                # and the terms searched: the ranking needs them only after the embedding.
                allowed = None
                if f.narrows:
                    allowed = asyncio.ensure_future(self._allowed(owner, f, at))
                    # Retrieved here when the ranking ends before it needs them.
                    allowed.add_done_callback(_retrieved)
                ranking = asyncio.ensure_future(
                    self.meaning.rank(owner, query, count, allowed=allowed)
                )
                try:
                    # The query's embedding starts (a provider call, or the local model's
                    # own thread) and goes on while the term search runs.
                    await asyncio.sleep(0)
                    # The fusion weighs the term matches by relevance alone: their best
                    # ``count`` by it (and as many newest) are all it needs scored.
                    by_terms = await self._search(owner, query, count, at, f, candidates=count)
                except BaseException:
                    ranking.cancel()
                    if allowed is not None:
                        allowed.cancel()
                    raise
                where, params = conditions(f, at)
                result = await hybrid_search(
                    self._db.reader,
                    ranking,
                    by_terms,
                    Fusion(owner, query, limit, at, self._half_life),
                    (where, {**params, "tenant_id": tenant_id, "user_id": user_id}),
                    memory_from_row,
                    lambda name, n: self._search(owner, name, n, at, f, most=MAX_NAMED),
                )
            if span is not None:
                span.set_attribute("contextd.memory.hits", len(result.found))
                if result.note:
                    span.set_attribute("contextd.memory.note", result.note)
        self.metrics.memory_search(time.perf_counter() - started, len(result.found))
        return result

    async def _allowed(self, owner: Owner, memory_filter: MemoryFilter, now: float) -> set[int]:
        """The ids of the owner's memories that meet a narrowing filter: the only ones a
        search by meaning may rank (read through the filter's indexes)."""
        where, params = conditions(memory_filter, now)
        rows = await self._db.reader.execute_fetchall(
            "SELECT m.id FROM memories AS m WHERE m.tenant_id = :tenant_id"
            f" AND m.user_id = :user_id AND {where}",
            {**params, "tenant_id": owner[0], "user_id": owner[1]},
        )
        return {int(row["id"]) for row in rows}

    async def _search(
        self,
        owner: Owner,
        query: str,
        limit: int,
        now: float,
        memory_filter: MemoryFilter,
        *,
        most: int | None = None,
        candidates: int | None = None,
        none: bool = False,
    ) -> list[ScoredMemory]:
        """The term search; nothing when ``most`` is given and even the rarest term is in
        more memories than that. ``candidates``: the best and the newest matches scored
        (by default ``CANDIDATES_PER_RESULT`` per result, at least ``MIN_CANDIDATES``).
        ``none``: the user is known to have no memory."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        limit = min(limit, MAX_SEARCH_LIMIT)
        tenant_id, user_id = owner
        if not user_id or none or owner in self._without_memories:
            return []
        terms = query_terms(query)
        if not terms:
            return []
        await self.ensure_index()
        keys = [memory_index.user_key(user_id, tenant_id)]
        if memory_filter.reads_past:
            keys.append(memory_index.user_key(user_id, tenant_id, past=True))
        keyed = [key + t for key in keys for t in terms]
        where, params = conditions(memory_filter, now)
        hits = await self.index.search(
            TermQuery(keyed, self._max_ranked, most, memory_filter.narrows),
            {
                **params,
                "now": now,
                "half_life": self._half_life,
                "tenant_id": tenant_id,
                "user_id": user_id,
                "weight": self._weight,
                "limit": limit,
                "candidates": candidates or max(MIN_CANDIDATES, CANDIDATES_PER_RESULT * limit),
            },
            where,
        )
        if (
            not hits.matched
            and self._remember_without
            and not await self._db.reader.execute_fetchall(
                "SELECT 1 FROM memories WHERE tenant_id = ? AND user_id = ? LIMIT 1", owner
            )
        ):
            if len(self._without_memories) >= WITHOUT_MEMORIES_KEPT:
                self._without_memories.clear()
            self._without_memories.add(owner)
        return [
            ScoredMemory(
                memory=memory_from_row(row),
                score=float(row["score"]),
                relevance=float(row["relevance"]),
                recency=float(row["recency"]),
                term_score=float(row["relevance"]),
            )
            for row in hits.rows
        ]


def _retrieved(task: asyncio.Future[set[int]]) -> None:
    """Marks a failure of the allowed ids' read as seen: the search by meaning reports
    the failure where it awaited them, and where it never did, the search went on
    without them."""
    if not task.cancelled():
        task.exception()

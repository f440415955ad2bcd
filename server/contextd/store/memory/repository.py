"""Memories: a user's atomic facts, deduplicated, searchable in Chinese and English.

A user is (tenant_id, user_id): reads and writes name both, index terms are keyed by both.

Search goes through an index of the terms made by ``contextd.core.search_terms``, each
keyed by its user, the engine's (store/memory/fts5_index.py: SQLite FTS5, migration
0002_memories.sql for the layout and why; tsvector_index.py: a PostgreSQL column). A search:

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

A search is two reads, an add four statements in one write transaction, a bulk load a
handful of ``executemany`` calls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from contextd.core.errors import SessionNotFound
from contextd.core.identity import DEFAULT_TENANT
from contextd.core.search_terms import TERMS_VERSION, content_hash, query_terms
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.store.engine.database import Connection, Database
from contextd.store.memory import index as memory_index
from contextd.store.memory.hybrid import Fusion, MeaningRanker, MemorySearchResult, hybrid_search
from contextd.store.memory.index import MEMORY_COLUMNS, choose_terms, memory_from_row
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
_COLUMNS = MEMORY_COLUMNS


def _clean(content: str) -> str:
    text = content.strip()
    if not text:
        raise ValueError("memory content must not be blank")
    return text


async def _touch(conn: Connection, memory_id: int, ts: float) -> Memory:
    """Refresh the memory's ``updated_at`` (stated again, it is current)."""
    rows = await conn.execute_fetchall(
        f"UPDATE memories SET updated_at = max(updated_at, ?) WHERE id = ? RETURNING {_COLUMNS}",
        (ts, memory_id),
    )
    return memory_from_row(rows[0])


@dataclass(frozen=True, slots=True)
class Rewrite:
    """What :meth:`MemoryRepo.rewrite` did: the memory as it was, the memory that now holds
    the text, and ``action``: "update" (the text changed in place), "merge" (``old`` was
    deleted: ``memory`` already said it) or "" (the same memory: only refreshed)."""

    old: Memory
    memory: Memory
    action: str


# Memoryless users remembered at most (the set is emptied when full).
WITHOUT_MEMORIES_KEPT = 100_000


class MemoryRepo:
    """A user's memories. ``get`` takes the tenant and no user, ``delete`` neither: the
    caller checks ownership."""

    def __init__(
        self,
        db: Database,
        *,
        half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
        recency_weight: float = DEFAULT_RECENCY_WEIGHT,
        max_ranked: int = DEFAULT_MAX_RANKED,
        metrics: Recorder = NULL_RECORDER,
        meaning: MeaningRanker | None = None,
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        """``meaning`` and ``changed`` come from the application layer when an embedding
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
        self.index = db.memory_index()
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

    # --- writes -------------------------------------------------------------------------

    async def add(
        self,
        user_id: str,
        content: str,
        source_session_id: str = "",
        source_message_id: int = 0,
        *,
        tenant_id: str = DEFAULT_TENANT,
        now: float | None = None,
    ) -> tuple[Memory, bool]:
        """Store a memory; ``(memory, True)`` if new.

        If the user already has the same memory (equal ``search_terms.dedup_key``: case,
        width, spacing and a final full stop do not count), that one is returned with
        ``False`` and its ``updated_at`` moves to ``now``: stated again, it is current.
        """
        owner = (tenant_id, user_id)
        added = await self._add(owner, content, source_session_id, source_message_id, now)
        self._has_memories(owner)
        if added[1]:
            self.changed()
        return added

    def _has_memories(self, owner: tuple[str, str]) -> None:
        """Called once a write that gave the user memories committed (store/engine/sqlite.py)."""
        self._without_memories.discard(owner)

    async def _add(
        self,
        owner: tuple[str, str],
        content: str,
        source_session_id: str,
        source_message_id: int,
        now: float | None,
    ) -> tuple[Memory, bool]:
        tenant_id, user_id = owner
        if not user_id:
            raise ValueError("user_id must not be empty")
        text = _clean(content)
        digest = content_hash(text)
        ts = time.time() if now is None else now
        await self.ensure_index()
        async with self._db.transaction() as conn:
            await self.lock_user(conn, owner, source_session_id)
            rows = list(
                await conn.execute_fetchall(
                    "INSERT INTO memories (tenant_id, user_id, content, content_hash,"
                    " source_session_id, source_message_id, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (tenant_id, user_id, content_hash) DO NOTHING RETURNING id",
                    (
                        tenant_id,
                        user_id,
                        text,
                        digest,
                        source_session_id,
                        source_message_id,
                        ts,
                        ts,
                    ),
                )
            )
            if rows:
                mid = int(rows[0]["id"])
                await self.index.add(conn, mid, owner, text)
                memory = Memory(
                    mid, user_id, text, source_session_id, source_message_id, ts, ts, tenant_id
                )
                return memory, True
            existing = list(
                await conn.execute_fetchall(
                    "UPDATE memories SET updated_at = max(updated_at, ?) WHERE tenant_id = ?"
                    f" AND user_id = ? AND content_hash = ? RETURNING {_COLUMNS}",
                    (ts, tenant_id, user_id, digest),
                )
            )
        return memory_from_row(existing[0]), False

    async def add_many(
        self,
        user_id: str,
        contents: Iterable[str],
        *,
        source_session_id: str = "",
        source_message_id: int = 0,
        now: float | None = None,
        timestamps: Sequence[float] | None = None,
        tenant_id: str = DEFAULT_TENANT,
    ) -> int:
        """Store many memories of one user in one transaction; returns how many were new.

        ``timestamps`` (one per content, e.g. when importing) set ``created_at`` and
        ``updated_at``; otherwise all get ``now``. Duplicates, within the batch or of stored
        memories, are handled as ``add`` does. Every content is checked before anything is
        written: one blank content refuses the whole batch.
        """
        owner = (tenant_id, user_id)
        added = await self._add_many(
            owner, contents, source_session_id, source_message_id, now, timestamps
        )
        self._has_memories(owner)
        if added:
            self.changed()
        return added

    async def _add_many(
        self,
        owner: tuple[str, str],
        contents: Iterable[str],
        source_session_id: str,
        source_message_id: int,
        now: float | None,
        timestamps: Sequence[float] | None,
    ) -> int:
        user_id = owner[1]
        if not user_id:
            raise ValueError("user_id must not be empty")
        texts = [_clean(c) for c in contents]
        if timestamps is not None and len(timestamps) != len(texts):
            raise ValueError("timestamps must give one time per content")
        default_ts = time.time() if now is None else now
        # content hash -> (first wording, created_at, updated_at)
        batch: dict[str, tuple[str, float, float]] = {}
        for i, text in enumerate(texts):
            ts = default_ts if timestamps is None else float(timestamps[i])
            digest = content_hash(text)
            seen = batch.get(digest)
            batch[digest] = (
                (text, ts, ts) if seen is None else (seen[0], min(seen[1], ts), max(seen[2], ts))
            )
        if not batch:
            return 0
        await self.ensure_index()
        async with self._db.transaction() as conn:
            await self.lock_user(conn, owner, source_session_id)
            rows = list(
                await conn.execute_fetchall("SELECT COALESCE(MAX(id), 0) AS id FROM memories")
            )
            before = int(rows[0]["id"])
            await conn.executemany(
                "INSERT INTO memories (tenant_id, user_id, content, content_hash,"
                " source_session_id, source_message_id, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, user_id, content_hash)"
                " DO UPDATE SET updated_at = max(memories.updated_at, excluded.updated_at)",
                [
                    (*owner, text, digest, source_session_id, source_message_id, created, updated)
                    for digest, (text, created, updated) in batch.items()
                ],
            )
            # New rows have ids above every id that existed before; only they get index rows.
            await self.index.add_new(
                conn, owner, {digest: text for digest, (text, _, _) in batch.items()}, before
            )
            # The owner's only: on PostgreSQL another server may add memories meanwhile.
            rows = list(
                await conn.execute_fetchall(
                    "SELECT COUNT(*) AS added FROM memories"
                    " WHERE tenant_id = ? AND user_id = ? AND id > ?",
                    (*owner, before),
                )
            )
        return int(rows[0]["added"])

    async def delete(self, memory_id: int) -> bool:
        """Delete a memory and its index entry; False if there was none."""
        await self.ensure_index()
        async with self._db.transaction() as conn:
            rows = list(
                await conn.execute_fetchall(
                    f"DELETE FROM memories WHERE id = ? RETURNING {_COLUMNS}", (memory_id,)
                )
            )
            if not rows:
                return False
            gone = memory_from_row(rows[0])
            await self.index.remove(conn, (gone.tenant_id, gone.user_id), [(gone.id, gone.content)])
        return True

    async def rewrite(
        self,
        conn: Connection,
        memory_id: int,
        user_id: str,
        expected_content: str,
        new_content: str,
        source_session_id: str,
        source_message_id: int,
        ts: float,
        *,
        tenant_id: str = DEFAULT_TENANT,
    ) -> Rewrite | None:
        """Give the (tenant's) user's memory ``memory_id`` the text ``new_content``, inside the
        caller's write transaction (begun after :meth:`ensure_index`); what was done.

        None (and nothing written) when the memory is gone, is another user's, or no longer
        says ``expected_content`` (compared as ``add`` dedups): someone changed it since it
        was read. When the user already has ``new_content`` as another memory, that one
        stays (refreshed) and this one is deleted: a "merge". The same memory in other words
        is only refreshed. Otherwise the text changes in place (an "update"), its provenance
        becoming the given source; ``created_at`` stays.
        """
        text = _clean(new_content)
        new_hash = content_hash(text)
        await self.lock_user(conn, (tenant_id, user_id), source_session_id)
        rows = await conn.execute_fetchall(
            f"SELECT {_COLUMNS}, content_hash FROM memories"
            " WHERE id = ? AND tenant_id = ? AND user_id = ?",
            (memory_id, tenant_id, user_id),
        )
        if not rows or rows[0]["content_hash"] != content_hash(expected_content):
            return None
        old = memory_from_row(rows[0])
        if rows[0]["content_hash"] == new_hash:
            return Rewrite(old, await _touch(conn, old.id, ts), "")
        others = await conn.execute_fetchall(
            "SELECT id FROM memories WHERE tenant_id = ? AND user_id = ? AND content_hash = ?",
            (tenant_id, user_id, new_hash),
        )
        owner = (tenant_id, user_id)
        if others:
            await conn.execute("DELETE FROM memories WHERE id = ?", (old.id,))
            await self.index.remove(conn, owner, [(old.id, old.content)])
            return Rewrite(old, await _touch(conn, int(others[0]["id"]), ts), "merge")
        updated = await conn.execute_fetchall(
            "UPDATE memories SET content = ?, content_hash = ?, source_session_id = ?,"
            " source_message_id = ?, updated_at = max(updated_at, ?),"
            " embedding = NULL, embedding_model = '', embedding_dims = 0"  # the old text's
            f" WHERE id = ? RETURNING {_COLUMNS}",
            (text, new_hash, source_session_id, source_message_id, ts, old.id),
        )
        await self.index.remove(conn, owner, [(old.id, old.content)])
        await self.index.add(conn, old.id, owner, text)
        return Rewrite(old, memory_from_row(updated[0]), "update")

    async def lock_user(
        self, conn: Connection, owner: tuple[str, str], source_session_id: str = ""
    ) -> None:
        """The user's memory writes, in any process, one after the other: a rewrite
        checks the text it replaces and the texts the user has, and an add must not slip
        in between. The user's erasure takes the same lock, so a write that names the
        session it comes from finds that session still there, or raises SessionNotFound:
        work after a turn that another process runs late cannot bring back a memory of a
        user erased meanwhile."""
        await self._db.lock_in_transaction(conn, "memories", *owner)
        if source_session_id and not await conn.execute_fetchall(
            "SELECT 1 FROM sessions WHERE id = ? AND tenant_id = ? AND user_id = ?",
            (source_session_id, *owner),
        ):
            raise SessionNotFound(source_session_id)

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
    ) -> tuple[list[Memory], str]:
        """A page of the user's memories, newest first, and the next page's token ("" at the
        end). ``page_size`` 0 means the default; a token from another listing is refused."""
        limit = page_limit(page_size)
        if page_token:
            created_at, last_id = decode_token(page_token, "memories", user_id, (float, int))
            rows = await self._db.reader.execute_fetchall(
                f"SELECT {_COLUMNS} FROM memories WHERE tenant_id = ? AND user_id = ?"
                " AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?",
                (tenant_id, user_id, created_at, last_id, limit + 1),
            )
        else:
            rows = await self._db.reader.execute_fetchall(
                f"SELECT {_COLUMNS} FROM memories WHERE tenant_id = ? AND user_id = ?"
                " ORDER BY created_at DESC, id DESC LIMIT ?",
                (tenant_id, user_id, limit + 1),
            )
        memories = [memory_from_row(r) for r in rows]
        if len(memories) <= limit:
            return memories, ""
        memories = memories[:limit]
        last = memories[-1]
        return memories, encode_token("memories", user_id, [last.created_at, last.id])

    async def search(
        self,
        user_id: str,
        query: str,
        limit: int = 10,
        now: float | None = None,
        *,
        tenant_id: str = DEFAULT_TENANT,
    ) -> list[ScoredMemory]:
        """The (tenant's) user's memories best matching ``query``, best first (see above).

        A query without usable terms (only punctuation, say) finds nothing; search syntax
        in it (quotes, ``*``, ``AND``, ``NEAR``, ``|``, parentheses) is plain text.
        """
        return (await self.search_noted(user_id, query, limit, now, tenant_id=tenant_id)).found

    async def search_noted(
        self,
        user_id: str,
        query: str,
        limit: int = 10,
        now: float | None = None,
        *,
        tenant_id: str = DEFAULT_TENANT,
    ) -> MemorySearchResult:
        """:meth:`search`, with a note when search by meaning is on but could not be used
        (store/memory/hybrid.py)."""
        started = time.perf_counter()
        owner = (tenant_id, user_id)
        with spans.span("contextd.memory_search", {"contextd.memory.limit": limit}) as span:
            if self.meaning is None or limit < 1 or not user_id or owner in self._without_memories:
                found = await self._search(user_id, query, limit, now, tenant_id)
                result = MemorySearchResult(found)
            else:
                limit = min(limit, MAX_SEARCH_LIMIT)
                count = max(MIN_CANDIDATES, CANDIDATES_PER_RESULT * limit)
                by_terms = await self._search(user_id, query, count, now, tenant_id)
                at = time.time() if now is None else now
                result = await hybrid_search(
                    self._db.reader,
                    self.meaning.rank(owner, query, count),
                    by_terms,
                    Fusion(owner, query, limit, at, self._half_life),
                    memory_from_row,
                )
            if span is not None:
                span.set_attribute("contextd.memory.hits", len(result.found))
                if result.note:
                    span.set_attribute("contextd.memory.note", result.note)
        self.metrics.memory_search(time.perf_counter() - started, len(result.found))
        return result

    async def _search(
        self, user_id: str, query: str, limit: int, now: float | None, tenant_id: str
    ) -> list[ScoredMemory]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        limit = min(limit, MAX_SEARCH_LIMIT)
        owner = (tenant_id, user_id)
        if not user_id or owner in self._without_memories:
            return []
        terms = query_terms(query)
        if not terms:
            return []
        await self.ensure_index()
        key = memory_index.user_key(user_id, tenant_id)
        keyed = [key + t for t in terms]
        frequency = await self.index.frequency(keyed, self._max_ranked)
        chosen = choose_terms(frequency, self._max_ranked)
        if not chosen:
            if (
                self._remember_without
                and not frequency
                and not await self._db.reader.execute_fetchall(
                    "SELECT 1 FROM memories WHERE tenant_id = ? AND user_id = ? LIMIT 1",
                    (tenant_id, user_id),
                )
            ):
                if len(self._without_memories) >= WITHOUT_MEMORIES_KEPT:
                    self._without_memories.clear()
                self._without_memories.add(owner)
            return []
        rows = await self.index.ranked(
            chosen,
            {
                "max_ranked": self._max_ranked,
                "now": time.time() if now is None else now,
                "half_life": self._half_life,
                "tenant_id": tenant_id,
                "user_id": user_id,
                "weight": self._weight,
                "limit": limit,
                "candidates": max(MIN_CANDIDATES, CANDIDATES_PER_RESULT * limit),
            },
        )
        return [
            ScoredMemory(
                memory=memory_from_row(row),
                score=float(row["score"]),
                relevance=float(row["relevance"]),
                recency=float(row["recency"]),
            )
            for row in rows
        ]

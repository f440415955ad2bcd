"""The memories' search index: what MemoryRepo asks of it, the user-keyed terms both
engines index, and SQLite's index (FTS5, migration 0002_memories.sql says why it is laid
out so). PostgreSQL's is in store/memory_index_pg.py.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

from contextd.core.identity import DEFAULT_TENANT
from contextd.core.search_terms import index_terms
from contextd.store.engine.database import Connection, Row
from contextd.store.engine.sqlite import SqliteDatabase
from contextd.store.memory_query import match_expression, search_sql
from contextd.store.models import Memory

# (tenant id, user id)
Owner = tuple[str, str]
REINDEX_BATCH = 5000


async def memory_batches(conn: Connection) -> AsyncIterator[Sequence[Row]]:
    """Every memory as (id, user_id, content, tenant_id), in id order, a batch at a time:
    what an index is rebuilt from, in bounded memory."""
    last = 0
    while True:
        rows = await conn.execute_fetchall(
            "SELECT id, user_id, content, tenant_id FROM memories WHERE id > ? ORDER BY id LIMIT ?",
            (last, REINDEX_BATCH),
        )
        if not rows:
            return
        yield rows
        last = int(rows[-1][0])


# The columns of a memory every search returns, then relevance, recency and score.
MEMORY_COLUMNS = (
    "id, user_id, content, source_session_id, source_message_id, created_at, updated_at, tenant_id"
)


def memory_from_row(row: Row) -> Memory:
    """The memory in the first columns of a row that starts with ``MEMORY_COLUMNS``."""
    mid, user_id, content, session_id, message_id, created_at, updated_at, tenant = row[:8]
    return Memory(
        id=mid,
        user_id=user_id,
        content=content,
        source_session_id=session_id,
        source_message_id=message_id,
        created_at=created_at,
        updated_at=updated_at,
        tenant_id=tenant,
    )


def user_key(user_id: str, tenant_id: str = DEFAULT_TENANT) -> str:
    """The 16 hex digits that prefix every index term of the user's memories.

    The default tenant's keys are those of the index before tenants existed (no rebuild);
    another tenant's are a hash keyed by the tenant, so the same user id in two tenants
    has two keys. Searches also filter on the tenant: a key collision could cost time,
    never show another user's memory.
    """
    data = user_id.encode("utf-8")
    if tenant_id == DEFAULT_TENANT:
        return hashlib.blake2b(data, digest_size=8).hexdigest()
    tenant = hashlib.blake2b(tenant_id.encode("utf-8"), digest_size=32).digest()
    return hashlib.blake2b(data, digest_size=8, key=tenant).hexdigest()


def keyed_terms(user_id: str, content: str, tenant_id: str = DEFAULT_TENANT) -> list[str]:
    """A memory's index terms, each prefixed with its user's key."""
    key = user_key(user_id, tenant_id)
    return [key + term for term in index_terms(content)]


def fts_terms(user_id: str, content: str, tenant_id: str = DEFAULT_TENANT) -> str:
    """The ``memories_fts.terms`` value of a memory: its keyed terms, space-separated."""
    return " ".join(keyed_terms(user_id, content, tenant_id))


class MemoryIndex(Protocol):
    """Index entries follow the memories inside the caller's write transaction."""

    async def prepare(self) -> None:
        """Once, before the first search."""

    async def add(self, conn: Connection, memory_id: int, owner: Owner, text: str) -> None:
        """Index a memory just inserted (or whose text just changed, after ``remove``)."""

    async def add_new(
        self, conn: Connection, owner: Owner, texts: Mapping[str, str], before: int
    ) -> None:
        """Index the owner's memories of these content hashes (-> text) with ids above
        ``before``: those a bulk insert just made."""

    async def remove(self, conn: Connection, owner: Owner, rows: Sequence[tuple[int, str]]) -> None:
        """Forget the entries of these (id, content) memories of the owner."""

    async def rebuild(self, conn: Connection) -> int:
        """Index every memory again; how many there are."""

    async def frequency(self, keyed: Sequence[str], budget: int) -> dict[str, int]:
        """How many memories hold each of these keyed terms (absent: none); a count
        above ``budget`` may be given as any number above it."""

    async def ranked(self, chosen: Sequence[str], params: dict[str, Any]) -> Sequence[Row]:
        """The ranking statement's rows for the chosen keyed terms (memories.py)."""


class FtsIndex:
    """SQLite: a contentless FTS5 table of keyed terms, rowid = memory id."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        self._search_sql = search_sql(MEMORY_COLUMNS)

    async def prepare(self) -> None:
        """SQLite builds without the math functions get ``pow`` from Python."""
        try:
            await self._db.reader.execute_fetchall("SELECT pow(0.5, 1.0)")
        except sqlite3.OperationalError:
            await self._db.create_function("pow", 2, math.pow, deterministic=True)

    async def add(self, conn: Connection, memory_id: int, owner: Owner, text: str) -> None:
        tenant_id, user_id = owner
        await conn.execute(
            "INSERT INTO memories_fts (rowid, terms) VALUES (?, ?)",
            (memory_id, fts_terms(user_id, text, tenant_id)),
        )

    async def add_new(
        self, conn: Connection, owner: Owner, texts: Mapping[str, str], before: int
    ) -> None:
        tenant_id, user_id = owner
        await conn.executemany(
            "INSERT INTO memories_fts (rowid, terms) SELECT id, ? FROM memories"
            " WHERE tenant_id = ? AND user_id = ? AND content_hash = ? AND id > ?",
            [
                (fts_terms(user_id, text, tenant_id), tenant_id, user_id, digest, before)
                for digest, text in texts.items()
            ],
        )

    async def remove(self, conn: Connection, owner: Owner, rows: Sequence[tuple[int, str]]) -> None:
        # A contentless FTS5 table forgets a row only when given its terms again.
        tenant_id, user_id = owner
        await conn.executemany(
            "INSERT INTO memories_fts (memories_fts, rowid, terms) VALUES ('delete', ?, ?)",
            [(memory_id, fts_terms(user_id, content, tenant_id)) for memory_id, content in rows],
        )

    async def rebuild(self, conn: Connection) -> int:
        await conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')")
        count = 0
        async for rows in memory_batches(conn):
            await conn.executemany(
                "INSERT INTO memories_fts (rowid, terms) VALUES (?, ?)",
                [
                    (mid, fts_terms(user_id, content, tenant))
                    for mid, user_id, content, tenant in rows
                ],
            )
            count += len(rows)
        return count

    async def frequency(self, keyed: Sequence[str], budget: int) -> dict[str, int]:
        return {
            term: int(docs)
            for term, docs in await self._db.reader.execute_fetchall(
                "SELECT term, doc FROM memories_fts_vocab"
                " WHERE term IN (SELECT value FROM json_each(?))",
                (json.dumps(list(keyed), ensure_ascii=False),),
            )
        }

    async def ranked(self, chosen: Sequence[str], params: dict[str, Any]) -> Sequence[Row]:
        return await self._db.reader.execute_fetchall(
            self._search_sql, {**params, "match": match_expression(chosen)}
        )

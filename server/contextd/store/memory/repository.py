"""Memories: a user's atomic facts, deduplicated, searchable in Chinese and English.

A user is (tenant_id, user_id): reads and writes name both, index terms are keyed by both.
Reads and searches are in reads.py (MemoryReads, which MemoryRepo extends); this module
writes: an add is four statements in one write transaction, a bulk load a handful of
``executemany`` calls. A memory's changes (a new value, a host's edit) are in versions.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence

from contextd.core.errors import SessionNotFound
from contextd.core.identity import DEFAULT_TENANT
from contextd.core.search_terms import content_hash
from contextd.store.engine.database import Connection
from contextd.store.memory import versions
from contextd.store.memory.index import MEMORY_COLUMNS, Owner, memory_from_row
from contextd.store.memory.reads import (
    CANDIDATES_PER_RESULT,
    DEFAULT_HALF_LIFE_DAYS,
    DEFAULT_MAX_RANKED,
    DEFAULT_RECENCY_WEIGHT,
    MAX_SEARCH_LIMIT,
    MIN_CANDIDATES,
    WITHOUT_MEMORIES_KEPT,
    MemoryReads,
)
from contextd.store.memory.versions import PLAIN, Change, MemoryDetails, MemoryEdit
from contextd.store.models import Memory

__all__ = [
    "CANDIDATES_PER_RESULT",
    "DEFAULT_HALF_LIFE_DAYS",
    "DEFAULT_MAX_RANKED",
    "DEFAULT_RECENCY_WEIGHT",
    "MAX_SEARCH_LIMIT",
    "MIN_CANDIDATES",
    "WITHOUT_MEMORIES_KEPT",
    "MemoryRepo",
]
_COLUMNS = MEMORY_COLUMNS


def _clean(content: str) -> str:
    text = content.strip()
    if not text:
        raise ValueError("memory content must not be blank")
    return text


class MemoryRepo(MemoryReads):
    """A user's memories. ``get`` takes the tenant and no user, ``delete`` neither: the
    caller checks ownership."""

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
        details: MemoryDetails = PLAIN,
    ) -> tuple[Memory, bool]:
        """Store a memory; ``(memory, True)`` if new.

        If the user already has the same memory in the same scope, without an end (equal
        ``search_terms.dedup_key``: case, width, spacing and a final full stop do not
        count), that one is returned with ``False`` and its ``updated_at`` moves to
        ``now``: stated again, it is current. Its expiry, if it has one, moves to the new
        one when that is later (restating never shortens a memory's life); its metadata
        stay. A memory given an end (``details.valid_to``) is always stored as new.
        """
        owner = (tenant_id, user_id)
        added = await self._add(
            owner, content, (source_session_id, source_message_id), now, details
        )
        self._has_memories(owner)
        if added[1]:
            self.changed()
        return added

    def _has_memories(self, owner: tuple[str, str]) -> None:
        """Called once a write that gave the user memories committed (store/engine/sqlite.py)."""
        self._without_memories.discard(owner)

    async def _add(
        self,
        owner: Owner,
        content: str,
        source: tuple[str, int],
        now: float | None,
        d: MemoryDetails,
    ) -> tuple[Memory, bool]:
        tenant_id, user_id = owner
        if not user_id:
            raise ValueError("user_id must not be empty")
        text = _clean(content)
        digest = content_hash(text)
        ts = time.time() if now is None else now
        valid_from = ts if d.valid_from is None else d.valid_from
        metadata = dict(d.metadata)
        await self.ensure_index()
        async with self._db.transaction() as conn:
            await self.lock_user(conn, owner, source[0])
            rows = list(
                await conn.execute_fetchall(
                    "INSERT INTO memories (tenant_id, user_id, content, content_hash,"
                    " source_session_id, source_message_id, created_at, updated_at, agent, app,"
                    " metadata, valid_from, valid_to, expires_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (tenant_id, user_id, agent, app, content_hash)"
                    " WHERE valid_to IS NULL DO NOTHING RETURNING id",
                    (
                        *owner,
                        text,
                        digest,
                        *source,
                        ts,
                        ts,
                        d.agent,
                        d.app,
                        versions.metadata_json(metadata),
                        valid_from,
                        d.valid_to,
                        d.expires_at,
                    ),
                )
            )
            if rows:
                mid = int(rows[0]["id"])
                await self.index.add(conn, mid, owner, text)
                await versions.write_metadata(conn, mid, owner, metadata)
                memory = Memory(
                    mid,
                    user_id,
                    text,
                    *source,
                    ts,
                    ts,
                    tenant_id,
                    d.agent,
                    d.app,
                    metadata,
                    valid_from,
                    d.valid_to,
                    d.expires_at,
                )
                return memory, True
            existing = list(
                await conn.execute_fetchall(
                    "UPDATE memories SET updated_at = max(updated_at, ?), expires_at = CASE"
                    " WHEN expires_at IS NULL OR CAST(? AS DOUBLE PRECISION) IS NULL THEN NULL"
                    " ELSE max(expires_at, ?) END"
                    " WHERE tenant_id = ? AND user_id = ? AND agent = ? AND app = ?"
                    f" AND content_hash = ? AND valid_to IS NULL RETURNING {_COLUMNS}",
                    (ts, d.expires_at, d.expires_at, *owner, d.agent, d.app, digest),
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
        owner: Owner,
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
                " source_session_id, source_message_id, created_at, updated_at, valid_from)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (tenant_id, user_id, agent, app, content_hash)"
                " WHERE valid_to IS NULL"
                " DO UPDATE SET updated_at = max(memories.updated_at, excluded.updated_at)",
                [
                    (
                        *owner,
                        text,
                        digest,
                        source_session_id,
                        source_message_id,
                        created,
                        updated,
                        created,
                    )
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
        """Delete a memory, the superseded memories that keep its earlier texts, and their
        index entries; False if there was none."""
        await self.ensure_index()
        async with self._db.transaction() as conn:
            gone = await self.delete_in(conn, [memory_id])
        return bool(gone)

    async def delete_in(self, conn: Connection, memory_ids: Sequence[int]) -> int:
        """Delete these memories and every memory they superseded (at any remove), with
        their index entries, inside the caller's write transaction; how many went."""
        rows = await conn.execute_fetchall(
            "WITH RECURSIVE gone (id) AS ("
            " SELECT CAST(value AS BIGINT) FROM json_each(?)"
            " UNION SELECT m.id FROM memories AS m JOIN gone AS g"
            " ON m.superseded_by = g.id AND m.superseded_by <> 0)"
            " DELETE FROM memories WHERE id IN (SELECT id FROM gone)"
            " RETURNING id, tenant_id, user_id, content, superseded_by",
            (json.dumps(list(memory_ids)),),
        )
        for row in rows:
            await self.index.remove(
                conn,
                (row["tenant_id"], row["user_id"]),
                [(int(row["id"]), row["content"])],
                past=bool(row["superseded_by"]),
            )
        # The history forgets them too (their own rows go by trigger): the changes whose
        # old text a deleted memory kept, or that merged one into another.
        await conn.execute(
            "DELETE FROM memory_history WHERE replaced_memory_id IN"
            " (SELECT CAST(value AS BIGINT) FROM json_each(?))",
            (json.dumps([int(row["id"]) for row in rows]),),
        )
        return len(rows)

    async def purge_expired(self, now: float, batch: int) -> int:
        """Delete up to ``batch`` memories whose expiry passed (with the memories they
        superseded), in one write transaction; how many went."""
        await self.ensure_index()
        async with self._db.transaction() as conn:
            rows = await conn.execute_fetchall(
                "SELECT id FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ?"
                " ORDER BY expires_at LIMIT ?",
                (now, batch),
            )
            return await self.delete_in(conn, [int(row["id"]) for row in rows])

    async def rewrite(
        self,
        conn: Connection,
        memory_id: int,
        owner: Owner,
        expected_content: str,
        new_content: str,
        source: tuple[str, int],
        ts: float,
    ) -> Change | None:
        """Give the owner's current memory ``memory_id`` the text ``new_content``, a new
        value of the fact (after a turn), inside the caller's write transaction (begun
        after :meth:`ensure_index`); what was done (store/memory/versions.py).

        None (and nothing written) when the memory is gone, is another user's, is no
        longer current, or no longer says ``expected_content`` (compared as ``add``
        dedups): someone changed it since it was read.
        """
        text = _clean(new_content)
        await self.lock_user(conn, owner, source[0])
        old = await versions.current_row(conn, memory_id, owner)
        if (
            old is None
            or old.superseded_by
            or old.valid_to is not None
            or content_hash(old.content) != content_hash(expected_content)
        ):
            return None
        return await versions.rewrite(conn, self.index, old, text, source, ts)

    async def edit(
        self, conn: Connection, memory_id: int, owner: Owner, change: MemoryEdit, ts: float
    ) -> Change | None:
        """A host's change of the owner's memory ``memory_id``, inside the caller's write
        transaction (begun after :meth:`ensure_index`); None when the owner has no such
        memory. See versions.edit for what it refuses."""
        if "content" in change.changes:
            change = MemoryEdit(
                change.changes, _clean(change.content), change.details, change.supersede
            )
        await self.lock_user(conn, owner)
        old = await versions.current_row(conn, memory_id, owner)
        if old is None:
            return None
        return await versions.edit(conn, self.index, old, change, ts)

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

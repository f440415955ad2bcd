"""The memory history: where memories written after a turn came from and how they changed.

Rows are described in migration 0004_memory_history.sql (and 0014, which made the texts
they replaced memories of their own). This repository writes only them:
:meth:`MemoryHistoryRepo.replace` has ``MemoryRepo.rewrite`` change the memory (its text
and search-index entry), :meth:`MemoryHistoryRepo.edit` has ``MemoryRepo.edit`` make a
host's change, and each records the change in the same transaction, so an old text is
never lost without its history row.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from typing import Any

from contextd.core.identity import DEFAULT_TENANT
from contextd.store.engine.database import Connection, Database
from contextd.store.memory.repository import MemoryRepo
from contextd.store.memory.versions import MemoryEdit
from contextd.store.models import Memory
from contextd.store.paging import decode_token, encode_token, page_limit

# The method of the changes hosts make through UpdateMemory.
API_METHOD = "api"


@dataclass(slots=True)
class MemoryChange:
    id: int
    memory_id: int
    user_id: str
    action: str  # "add", "update" or "merge"
    # update: the superseded memory that keeps old_content (0: the history only);
    # merge: the replaced memory, superseded by memory_id.
    old_content: str
    new_content: str
    replaced_memory_id: int
    method: str  # "rule-fallback" or "llm:<model>"
    source_session_id: str
    source_message_id: int
    changed_at: float


@dataclass(slots=True)
class Replacement:
    """What :meth:`MemoryHistoryRepo.replace` did: the memory that now holds the text, and
    the history row (None when the new text was the old one, which is only refreshed)."""

    memory: Memory
    change: MemoryChange | None


# A history row's columns: MemoryChange's fields, named alike.
_FIELDS = tuple(field.name for field in fields(MemoryChange))
_COLUMNS = ", ".join(_FIELDS)


def _change_from_row(row: Any) -> MemoryChange:
    return MemoryChange(**{name: row[name] for name in _FIELDS})


async def _insert(
    conn: Connection,
    memory_id: int,
    user_id: str,
    action: str,
    old: str,
    new: str,
    replaced: int,
    method: str,
    session_id: str,
    message_id: int,
    ts: float,
    tenant_id: str,
) -> MemoryChange:
    rows = list(
        await conn.execute_fetchall(
            "INSERT INTO memory_history (memory_id, tenant_id, user_id, action, old_content,"
            " new_content, replaced_memory_id, method, source_session_id, source_message_id,"
            f" changed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {_COLUMNS}",
            (
                memory_id,
                tenant_id,
                user_id,
                action,
                old,
                new,
                replaced,
                method,
                session_id,
                message_id,
                ts,
            ),
        )
    )
    return _change_from_row(rows[0])


class MemoryHistoryRepo:
    def __init__(self, db: Database, memories: MemoryRepo) -> None:
        self._db = db
        self._memories = memories

    async def record_add(
        self, memory: Memory, method: str, *, now: float | None = None
    ) -> MemoryChange:
        """Record that ``memory`` was extracted (by ``method``) from its source message."""
        async with self._db.transaction() as conn:
            return await _insert(
                conn,
                memory.id,
                memory.user_id,
                "add",
                "",
                memory.content,
                0,
                method,
                memory.source_session_id,
                memory.source_message_id,
                time.time() if now is None else now,
                memory.tenant_id,
            )

    async def replace(
        self,
        memory_id: int,
        user_id: str,
        expected_content: str,
        new_content: str,
        method: str,
        source_session_id: str = "",
        source_message_id: int = 0,
        *,
        tenant_id: str = DEFAULT_TENANT,
        now: float | None = None,
    ) -> Replacement | None:
        """Give the (tenant's) user's memory ``memory_id`` the new value ``new_content``,
        keeping the old text as a superseded memory and in the history; one transaction.

        None (and nothing written) when the memory is gone, is another user's, is no
        longer current, or no longer says ``expected_content``: someone changed it since
        it was read. When the user already has ``new_content`` as another memory, that one
        stays (refreshed) and the replaced one is superseded by it, recorded as a "merge".
        See ``MemoryRepo.rewrite``.
        """
        ts = time.time() if now is None else now
        await self._memories.ensure_index()
        async with self._db.transaction() as conn:
            done = await self._memories.rewrite(
                conn,
                memory_id,
                (tenant_id, user_id),
                expected_content,
                new_content,
                (source_session_id, source_message_id),
                ts,
            )
            if done is None:
                return None
            if not done.action:  # the same memory in other words: only refreshed
                return Replacement(done.memory, None)
            change = await _insert(
                conn,
                done.memory.id,
                user_id,
                done.action,
                done.old.content,
                done.memory.content,
                done.replaced_id,
                method,
                source_session_id,
                source_message_id,
                ts,
                tenant_id,
            )
        return Replacement(done.memory, change)

    async def edit(
        self,
        memory_id: int,
        owner: tuple[str, str],
        change: MemoryEdit,
        *,
        now: float | None = None,
    ) -> Memory | None:
        """A host's change of the owner's memory (``MemoryRepo.edit``); a new text is
        recorded as an "update" by the method "api". None when the owner has no such
        memory."""
        ts = time.time() if now is None else now
        await self._memories.ensure_index()
        async with self._db.transaction() as conn:
            done = await self._memories.edit(conn, memory_id, owner, change, ts)
            if done is None:
                return None
            if done.action:
                memory = done.memory
                await _insert(
                    conn,
                    memory.id,
                    memory.user_id,
                    done.action,
                    done.old.content,
                    memory.content,
                    done.replaced_id,
                    API_METHOD,
                    memory.source_session_id,
                    memory.source_message_id,
                    ts,
                    memory.tenant_id,
                )
        if done.action:
            self._memories.changed()  # the new text needs its vector
        return done.memory

    async def for_memory(self, memory_id: int) -> list[MemoryChange]:
        """The memory's history, oldest first."""
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_COLUMNS} FROM memory_history WHERE memory_id = ? ORDER BY id",
            (memory_id,),
        )
        return [_change_from_row(row) for row in rows]

    async def for_user(
        self, user_id: str, limit: int = 100, *, tenant_id: str = DEFAULT_TENANT
    ) -> list[MemoryChange]:
        """The (tenant's) user's newest ``limit`` history rows, newest first."""
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_COLUMNS} FROM memory_history WHERE tenant_id = ? AND user_id = ?"
            " ORDER BY id DESC LIMIT ?",
            (tenant_id, user_id, limit),
        )
        return [_change_from_row(row) for row in rows]

    async def page(
        self, owner: tuple[str, str], memory_id: int, page_size: int, page_token: str
    ) -> tuple[list[MemoryChange], str]:
        """A page of the owner's history rows (of one memory, unless ``memory_id`` is 0),
        newest first, and the next page's token ("" at the end); ValueError for a token
        of another listing."""
        limit = page_limit(page_size)
        scope = f"{owner[0]}\n{owner[1]}\n{memory_id}"
        before: object = 2**63 - 1
        if page_token:
            (before,) = decode_token(page_token, "memory_history", scope, (int,))
        one = " AND memory_id = :memory_id" if memory_id else ""
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_COLUMNS} FROM memory_history WHERE tenant_id = :tenant_id"
            f" AND user_id = :user_id{one} AND id < :before ORDER BY id DESC LIMIT :limit",
            {
                "tenant_id": owner[0],
                "user_id": owner[1],
                "memory_id": memory_id,
                "before": before,
                "limit": limit + 1,
            },
        )
        changes = [_change_from_row(row) for row in rows]
        if len(changes) <= limit:
            return changes, ""
        changes = changes[:limit]
        return changes, encode_token("memory_history", scope, [changes[-1].id])

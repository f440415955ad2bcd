"""The memory history: where memories written after a turn came from and how they changed.

Rows are described in migration 0004_memory_history.sql. This repository writes only them:
:meth:`MemoryHistoryRepo.replace` has ``MemoryRepo.rewrite`` change the memory (its text
and search-index entry) and records the change in the same transaction, so an old text is
never lost without its history row.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from typing import Any

from contextd.core.identity import DEFAULT_TENANT
from contextd.store.engine.database import Connection, Database
from contextd.store.memory.repository import MemoryRepo
from contextd.store.models import Memory


@dataclass(slots=True)
class MemoryChange:
    id: int
    memory_id: int
    user_id: str
    action: str  # "add", "update" or "merge"
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
        """Replace the (tenant's) user's memory ``memory_id`` with ``new_content``, keeping
        the old text in the history; one transaction.

        None (and nothing written) when the memory is gone, is another user's, or no longer
        says ``expected_content``: someone changed it since it was read. When the user
        already has ``new_content`` as another memory, that one stays (refreshed) and the
        replaced one is deleted, recorded as a "merge". See ``MemoryRepo.rewrite``.
        """
        ts = time.time() if now is None else now
        await self._memories.ensure_index()
        async with self._db.transaction() as conn:
            done = await self._memories.rewrite(
                conn,
                memory_id,
                user_id,
                expected_content,
                new_content,
                source_session_id,
                source_message_id,
                ts,
                tenant_id=tenant_id,
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
                done.old.id if done.action == "merge" else 0,
                method,
                source_session_id,
                source_message_id,
                ts,
                tenant_id,
            )
        return Replacement(done.memory, change)

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

"""The memory history: where memories written after a turn came from and how they changed.

Rows are described in migration 0004_memory_history.sql. :meth:`MemoryHistoryRepo.replace`
is the one write here that touches the memories themselves: it replaces a memory's text in
place, its search-index entry and the history row in one transaction, so an old text is
never lost without its history row. It changes the index exactly as ``MemoryRepo`` does
(``fts_terms`` of the old text out, of the new text in); call it after the repository has
checked its index version (any ``MemoryRepo.search`` or ``add`` does), as the after-turn
runner does: a rebuild for a new terms version rewrites every entry anyway.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from contextd.core.search_terms import content_hash
from contextd.store.db import Connection, Database
from contextd.store.memories import fts_terms, memory_from_row
from contextd.store.models import Memory

_MEMORY_COLUMNS = (
    "id, user_id, content, source_session_id, source_message_id, created_at, updated_at"
)
_COLUMNS = (
    "id, memory_id, user_id, action, old_content, new_content, replaced_memory_id, method,"
    " source_session_id, source_message_id, changed_at"
)


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


def _change_from_row(row: Any) -> MemoryChange:
    return MemoryChange(*row[:11])


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
) -> MemoryChange:
    rows = list(
        await conn.execute_fetchall(
            "INSERT INTO memory_history (memory_id, user_id, action, old_content, new_content,"
            " replaced_memory_id, method, source_session_id, source_message_id, changed_at)"
            f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {_COLUMNS}",
            (memory_id, user_id, action, old, new, replaced, method, session_id, message_id, ts),
        )
    )
    return _change_from_row(rows[0])


class MemoryHistoryRepo:
    def __init__(self, db: Database) -> None:
        self._db = db

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
        now: float | None = None,
    ) -> Replacement | None:
        """Replace the user's memory ``memory_id`` with ``new_content``, keeping the old text
        in the history; one transaction.

        None (and nothing written) when the memory is gone, is another user's, or no longer
        says ``expected_content`` (compared as MemoryRepo dedups): someone changed it since
        it was read. When the user already has ``new_content`` as another memory, that one
        stays (refreshed) and the replaced one is deleted, recorded as a "merge". The
        memory's provenance becomes the given source; ``created_at`` stays.
        """
        text = new_content.strip()
        if not text:
            raise ValueError("memory content must not be blank")
        new_hash = content_hash(text)
        ts = time.time() if now is None else now
        async with self._db.transaction() as conn:
            rows = list(
                await conn.execute_fetchall(
                    f"SELECT {_MEMORY_COLUMNS}, content_hash FROM memories"
                    " WHERE id = ? AND user_id = ?",
                    (memory_id, user_id),
                )
            )
            if not rows or rows[0][7] != content_hash(expected_content):
                return None
            old = memory_from_row(rows[0])
            if rows[0][7] == new_hash:  # the same memory in other words: only refreshed
                refreshed = await self._touch(conn, old.id, ts)
                return Replacement(refreshed, None)
            others = list(
                await conn.execute_fetchall(
                    "SELECT id FROM memories WHERE user_id = ? AND content_hash = ?",
                    (user_id, new_hash),
                )
            )
            if others:
                survivor_id = int(others[0][0])
                await conn.execute("DELETE FROM memories WHERE id = ?", (old.id,))
                await self._unindex(conn, old)
                survivor = await self._touch(conn, survivor_id, ts)
                change = await _insert(
                    conn,
                    survivor.id,
                    user_id,
                    "merge",
                    old.content,
                    survivor.content,
                    old.id,
                    method,
                    source_session_id,
                    source_message_id,
                    ts,
                )
                return Replacement(survivor, change)
            updated = list(
                await conn.execute_fetchall(
                    "UPDATE memories SET content = ?, content_hash = ?, source_session_id = ?,"
                    " source_message_id = ?, updated_at = max(updated_at, ?)"
                    f" WHERE id = ? RETURNING {_MEMORY_COLUMNS}",
                    (text, new_hash, source_session_id, source_message_id, ts, old.id),
                )
            )
            await self._unindex(conn, old)
            await conn.execute(
                "INSERT INTO memories_fts (rowid, terms) VALUES (?, ?)",
                (old.id, fts_terms(user_id, text)),
            )
            change = await _insert(
                conn,
                old.id,
                user_id,
                "update",
                old.content,
                text,
                0,
                method,
                source_session_id,
                source_message_id,
                ts,
            )
            return Replacement(memory_from_row(updated[0]), change)

    @staticmethod
    async def _unindex(conn: Connection, memory: Memory) -> None:
        # A contentless FTS5 table forgets a row only when given its terms again.
        await conn.execute(
            "INSERT INTO memories_fts (memories_fts, rowid, terms) VALUES ('delete', ?, ?)",
            (memory.id, fts_terms(memory.user_id, memory.content)),
        )

    @staticmethod
    async def _touch(conn: Connection, memory_id: int, ts: float) -> Memory:
        rows = list(
            await conn.execute_fetchall(
                "UPDATE memories SET updated_at = max(updated_at, ?) WHERE id = ?"
                f" RETURNING {_MEMORY_COLUMNS}",
                (ts, memory_id),
            )
        )
        return memory_from_row(rows[0])

    async def for_memory(self, memory_id: int) -> list[MemoryChange]:
        """The memory's history, oldest first."""
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_COLUMNS} FROM memory_history WHERE memory_id = ? ORDER BY id",
            (memory_id,),
        )
        return [_change_from_row(row) for row in rows]

    async def for_user(self, user_id: str, limit: int = 100) -> list[MemoryChange]:
        """The user's newest ``limit`` history rows, newest first."""
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_COLUMNS} FROM memory_history WHERE user_id = ? ORDER BY id DESC LIMIT ?",
            (user_id, limit),
        )
        return [_change_from_row(row) for row in rows]

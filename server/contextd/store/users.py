"""A user as a whole: erase every row stored for them, in one write transaction.

Sessions go with everything in them (messages, token counts, compression and session
summaries cascade from ``sessions``), then the user's memories with their search index
entries and history, then the user's API keys. The sessions' event logs are files:
``LogRemovals`` removes them once the transaction committed. Every statement finds the
user's rows by tenant and ``user_id`` (or their sessions'): a user of the same name in
another tenant is another user.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextd.core.identity import DEFAULT_TENANT
from contextd.store.engine.database import Connection, Database
from contextd.store.event_log.removals import LogRemovals, Note
from contextd.store.memory.repository import MemoryRepo


@dataclass(frozen=True, slots=True)
class Erased:
    """How many of each were deleted."""

    sessions: int = 0
    messages: int = 0
    summaries: int = 0  # compression summaries and session summaries
    memories: int = 0
    memory_history: int = 0
    event_logs: int = 0
    api_keys: int = 0


class UserRepo:
    def __init__(self, db: Database, memories: MemoryRepo, removals: LogRemovals) -> None:
        self._db = db
        self._memories = memories
        self._removals = removals

    async def erase(
        self, user_id: str, tenant_id: str = DEFAULT_TENANT
    ) -> tuple[Erased, Note | None]:
        """Delete every row stored for the user; all counts 0 when nothing was left.

        Returns as soon as the transaction committed, with the note of the event logs
        still to remove (``LogRemovals.finish``; ``event_logs`` is counted then)."""
        if not user_id:
            raise ValueError("user_id must not be empty")
        await self._memories.ensure_index()  # the index entries are removed by their terms
        owner = {"tenant": tenant_id, "user": user_id}
        async with self._db.transaction() as conn:
            # First, as every memory write does: one that was waiting runs after this
            # erasure and finds the user's sessions gone (MemoryRepo.lock_user).
            await self._memories.lock_user(conn, (tenant_id, user_id))
            session_ids = [
                str(row["id"])
                for row in await conn.execute_fetchall(
                    "SELECT id FROM sessions WHERE tenant_id = :tenant AND user_id = :user", owner
                )
            ]
            messages, summaries = await _session_contents(conn, owner)
            note = await self._removals.note(conn, [(tenant_id, s) for s in session_ids])
            await conn.execute(
                "DELETE FROM sessions WHERE tenant_id = :tenant AND user_id = :user", owner
            )
            history, memories = await _erase_memories(conn, owner, self._memories)
            keys = await conn.execute(
                "DELETE FROM api_keys WHERE tenant_id = :tenant AND user_id = :user", owner
            )
        self._forget_sessions(tenant_id, session_ids)
        for forget in self._db.user_erased:
            forget(tenant_id, user_id)
        erased = Erased(
            sessions=len(session_ids),
            messages=messages,
            summaries=summaries,
            memories=memories,
            memory_history=history,
            api_keys=keys.rowcount,
        )
        return erased, note

    def _forget_sessions(self, tenant_id: str, session_ids: Sequence[str]) -> None:
        """Drop the deleted sessions from the repositories' caches (after the commit)."""
        for session_id in session_ids:
            for forget in self._db.session_deleted:
                forget(tenant_id, session_id)


async def _session_contents(conn: Connection, owner: dict[str, str]) -> tuple[int, int]:
    """How many messages and summaries the user's sessions hold."""
    rows = await conn.execute_fetchall(
        "WITH mine AS (SELECT id FROM sessions WHERE tenant_id = :tenant AND user_id = :user)"
        " SELECT (SELECT COUNT(*) FROM conversation"
        "  WHERE session_id IN (SELECT id FROM mine)) AS messages,"
        " (SELECT COUNT(*) FROM compression_summaries"
        "  WHERE session_id IN (SELECT id FROM mine))"
        " + (SELECT COUNT(*) FROM session_summaries"
        "  WHERE session_id IN (SELECT id FROM mine)) AS summaries",
        owner,
    )
    return int(rows[0]["messages"]), int(rows[0]["summaries"])


async def _erase_memories(
    conn: Connection, owner: dict[str, str], repo: MemoryRepo
) -> tuple[int, int]:
    """Delete the user's memory history, memories and their index entries; the counts."""
    history = await conn.execute(
        "DELETE FROM memory_history WHERE tenant_id = :tenant AND user_id = :user", owner
    )
    memories = await conn.execute_fetchall(
        "DELETE FROM memories WHERE tenant_id = :tenant AND user_id = :user"
        " RETURNING id, content, superseded_by",
        owner,
    )
    for past in (False, True):  # current memories, then superseded ones (their own key)
        await repo.index.remove(
            conn,
            (owner["tenant"], owner["user"]),
            [(int(r["id"]), r["content"]) for r in memories if bool(r["superseded_by"]) == past],
            past=past,
        )
    return history.rowcount, len(memories)

"""Sessions without activity since a cutoff: found a chunk of rows at a time, deleted a
batch at a time, so that no statement holds the event loop for long.

A session's activity is its ``updated_at``: its creation, then each stored message.
Deleting a session deletes its messages, token counts and summaries (they cascade);
the user's memories stay. Its event log goes after the commit, through
``LogRemovals``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contextd.store.engine.database import Database
from contextd.store.event_log.removals import LogRemovals, Session


@dataclass(frozen=True, slots=True)
class Purged:
    """How many of each were deleted."""

    sessions: int = 0
    messages: int = 0
    summaries: int = 0  # compression summaries and session summaries
    event_logs: int = 0
    memories: int = 0  # expired, with the memories they superseded

    def __add__(self, other: Purged) -> Purged:
        return Purged(
            self.sessions + other.sessions,
            self.messages + other.messages,
            self.summaries + other.summaries,
            self.event_logs + other.event_logs,
            self.memories + other.memories,
        )


class SessionPurge:
    def __init__(self, db: Database, removals: LogRemovals) -> None:
        self._db = db
        self._removals = removals

    async def inactive(self, cutoff: float, after: int, rows: int) -> tuple[list[Session], int]:
        """The sessions (tenant, id) inactive since ``cutoff`` among the next ``rows``
        sessions after rowid ``after``, and the last rowid read (0 once all were read)."""
        found = await self._db.reader.execute_fetchall(
            "SELECT rowid, tenant_id, id, updated_at < ? AS inactive FROM sessions"
            " WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (cutoff, after, rows),
        )
        sessions = [(str(row["tenant_id"]), str(row["id"])) for row in found if row["inactive"]]
        last = int(found[-1]["rowid"]) if len(found) == rows else 0
        return sessions, last

    async def delete(
        self, sessions: Sequence[Session], cutoff: float, busy: Callable[[str], bool]
    ) -> Purged:
        """Delete those of ``session_ids`` still inactive since ``cutoff`` and not
        ``busy`` (a chat turn or after-turn work on them), both judged inside the
        transaction, so that nothing can start on a session between the check and the
        delete."""
        async with self._db.transaction() as conn:
            candidates = [sid for _, sid in sessions if not busy(sid)]
            rows = await conn.execute_fetchall(
                "SELECT id, tenant_id FROM sessions"
                " WHERE id IN (SELECT value FROM json_each(?)) AND updated_at < ?",
                (json.dumps(candidates), cutoff),
            )
            ids = json.dumps([str(row["id"]) for row in rows])
            counts = await conn.execute_fetchall(
                "WITH gone AS (SELECT value FROM json_each(:ids))"
                " SELECT (SELECT COUNT(*) FROM conversation"
                "  WHERE session_id IN (SELECT value FROM gone)) AS messages,"
                " (SELECT COUNT(*) FROM compression_summaries"
                "  WHERE session_id IN (SELECT value FROM gone))"
                " + (SELECT COUNT(*) FROM session_summaries"
                "  WHERE session_id IN (SELECT value FROM gone)) AS summaries",
                {"ids": ids},
            )
            deleted = [(str(row["tenant_id"]), str(row["id"])) for row in rows]
            note = await self._removals.note(conn, deleted)
            await conn.execute(
                "DELETE FROM sessions WHERE id IN (SELECT value FROM json_each(?))", (ids,)
            )
        for tenant_id, session_id in deleted:
            for forget in self._db.session_deleted:
                forget(tenant_id, session_id)
        return Purged(
            sessions=len(deleted),
            messages=int(counts[0]["messages"]),
            summaries=int(counts[0]["summaries"]),
            event_logs=await self._removals.finish(note),
        )

"""Summaries: a session's compression summary (it stands in for the older messages it folded)
and per-session summaries (the ``recent_sessions`` layer of the user's other sessions).

A session's active compression summary is read by every turn twice (the window, the
compression check after it) and changes rarely: it is kept in memory per session, set by
:meth:`SummaryRepo.add_compression` (the table's only writer in this process, the
database's only writer) and dropped when the session is deleted. Every write changes the
caches once it committed (the rule in store/engine/sqlite.py). Where other processes share the
database (PostgreSQL), a session's compression writes, in any process, run one after the
other and move the session's version on (``Database.next_session_version``), and a kept
summary answers only a read that names the version its call read, as the session's kept
messages do (store/conversation_reads.py has the rule).

The user's other sessions' summaries (``recent_sessions``) are read by every turn too:
each list is kept until a summary it may show changes
(:meth:`SummaryRepo.upsert_session_summary` of another of the user's sessions than the one
it leaves out) or a session is deleted.

Where another server may write (PostgreSQL: ``Database.shared_between_processes``),
these lists are not kept: a build reads them with its session (store/sessions.py).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from contextd.core.errors import SessionNotFound
from contextd.core.identity import DEFAULT_TENANT
from contextd.store.engine.database import Database
from contextd.store.models import CompressionSummaryRow, SessionSummary

# Sessions whose active compression summary (or its absence) is kept in memory.
ACTIVE_CACHE_SESSIONS = 1024
# Users whose recent session summaries are kept, and lists kept per user.
RECENT_CACHE_USERS = 1024
RECENT_CACHE_LISTS = 16

_COMPRESSION_COLUMNS = "id, session_id, message_ids, start_message_id, summary, active, created_at"


def _compression_from_row(row: Any) -> CompressionSummaryRow:
    return CompressionSummaryRow(
        id=row["id"],
        session_id=row["session_id"],
        message_ids=tuple(int(m) for m in json.loads(row["message_ids"])),
        start_message_id=row["start_message_id"],
        summary=row["summary"],
        active=bool(row["active"]),
        created_at=row["created_at"],
    )


class SummaryRepo:
    def __init__(self, db: Database) -> None:
        self._db = db
        # Recent lists are kept only while this process is the database's only writer;
        # active summaries otherwise with the session version they were read at.
        self._keep = not db.shared_between_processes
        self._versioned = db.shared_between_processes
        # session id -> its active compression summary, None when it has none.
        self._active: OrderedDict[str, CompressionSummaryRow | None] = OrderedDict()
        # session id -> the session version its kept summary is at (PostgreSQL).
        self._active_versions: dict[str, int] = {}
        # (tenant id, user id) -> (session left out, limit) -> recent_session_summaries'
        # answer.
        self._recent: OrderedDict[tuple[str, str], dict[tuple[str, int], list[SessionSummary]]] = (
            OrderedDict()
        )
        db.session_deleted.append(self._forget)
        db.messages_appended.append(self._messages_appended)

    def _forget(self, tenant_id: str, session_id: str) -> None:
        self._drop_active(session_id)
        self._recent.clear()  # its summary may be in any list of its user's

    def _drop_active(self, session_id: str) -> None:
        self._active.pop(session_id, None)
        self._active_versions.pop(session_id, None)

    def _messages_appended(self, session_id: str, version: int) -> None:
        """A write of the session's messages alone moved its version on to ``version``:
        a summary kept at the version before it is still the active one."""
        if self._active_versions.get(session_id) == version - 1 and session_id in self._active:
            self._active_versions[session_id] = version

    def _remember(
        self, session_id: str, row: CompressionSummaryRow | None, version: int | None
    ) -> None:
        """Keep ``row`` as the session's active summary, read at ``version`` (None: no
        other process writes), unless the version moved on since the read."""
        if version is not None and self._active_versions.get(session_id) != version:
            return
        self._active[session_id] = row
        self._active.move_to_end(session_id)
        if len(self._active) > ACTIVE_CACHE_SESSIONS:
            self._drop_active(next(iter(self._active)))

    def _check(self, session_id: str, version: int | None) -> None:
        """A call read the session at ``version``: a summary kept at another one goes."""
        if version is None or self._active_versions.get(session_id) == version:
            return
        self._active.pop(session_id, None)
        if len(self._active_versions) >= 2 * ACTIVE_CACHE_SESSIONS:
            self._active_versions = {
                k: v for k, v in self._active_versions.items() if k in self._active
            }
        self._active_versions[session_id] = version

    def active_version(self, session_id: str) -> int | None:
        """The session version the kept active summary is at (None: none kept)."""
        return self._active_versions.get(session_id) if session_id in self._active else None

    def read_at(
        self, session_id: str, version: int, active: CompressionSummaryRow | None, read: bool
    ) -> None:
        """The session was read at ``version`` by a call, with its active summary
        (``active``) when ``read``."""
        self._check(session_id, version)
        if read:
            self._remember(session_id, active, version)

    async def add_compression(
        self, session_id: str, message_ids: Sequence[int], start_message_id: int, summary: str
    ) -> CompressionSummaryRow:
        """Store a new active compression summary; the session's earlier ones become inactive.

        Raises SessionNotFound when the session does not exist.
        """
        added = await self._add_compression(session_id, message_ids, start_message_id, summary)
        assert added is not None, "written whatever was active"
        return added

    async def add_compression_after(
        self,
        session_id: str,
        previous_id: int,
        message_ids: Sequence[int],
        start_message_id: int,
        summary: str,
    ) -> CompressionSummaryRow | None:
        """``add_compression`` of a summary made from the active one ``previous_id`` (0:
        none was active): None, and nothing written, when another became active since it
        was read (written by another process, it folds the same messages)."""
        return await self._add_compression(
            session_id, message_ids, start_message_id, summary, previous_id
        )

    async def _add_compression(
        self,
        session_id: str,
        message_ids: Sequence[int],
        start_message_id: int,
        summary: str,
        previous_id: int | None = None,
    ) -> CompressionSummaryRow | None:
        ids = [int(m) for m in message_ids]
        async with self._db.transaction() as conn:
            # Writers of one session's summaries, in any process, one after the other:
            # each sees the summary the one before it made active.
            version = await self._db.next_session_version(conn, session_id)
            if previous_id is not None:
                active = await conn.execute_fetchall(
                    "SELECT id FROM compression_summaries WHERE session_id = ? AND active = 1",
                    (session_id,),
                )
                if (int(active[0]["id"]) if active else 0) != previous_id:
                    self._drop_active(session_id)
                    return None
            await conn.execute(
                "UPDATE compression_summaries SET active = 0 WHERE session_id = ? AND active = 1",
                (session_id,),
            )
            rows = await conn.execute_fetchall(
                "INSERT INTO compression_summaries"
                " (session_id, message_ids, start_message_id, summary, active, created_at)"
                " SELECT id, ?, ?, ?, 1, ? FROM sessions WHERE id = ?"
                f" RETURNING {_COMPRESSION_COLUMNS}",
                (json.dumps(ids), start_message_id, summary, time.time(), session_id),
            )
            if not rows:
                raise SessionNotFound(session_id)
        added = _compression_from_row(next(iter(rows)))
        if version is not None:  # kept only over the summary of the version before
            if self.active_version(session_id) != version - 1:
                self._drop_active(session_id)
                return added
            self._active_versions[session_id] = version
        self._remember(session_id, added, version)
        return added

    async def active_compression(
        self, session_id: str, *, version: int | None = None
    ) -> CompressionSummaryRow | None:
        """The session's active compression summary (shared with later calls: it is
        frozen). ``version``: the session's, as the caller's call read it; where other
        processes write (PostgreSQL), only a read that names it is answered from memory."""
        kept = not self._versioned or version is not None
        if kept:
            self._check(session_id, version)
            if session_id in self._active:
                self._active.move_to_end(session_id)
                return self._active[session_id]
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_COMPRESSION_COLUMNS} FROM compression_summaries"
            " WHERE session_id = ? AND active = 1",
            (session_id,),
        )
        active = next((_compression_from_row(row) for row in rows), None)
        if kept:
            self._remember(session_id, active, version)
        return active

    async def _owned(self, session_id: str, tenant_id: str, user_id: str) -> bool:
        rows = await self._db.reader.execute_fetchall(
            "SELECT 1 FROM sessions WHERE id = ? AND tenant_id = ? AND user_id = ?",
            (session_id, tenant_id, user_id),
        )
        return bool(rows)

    async def upsert_session_summary(
        self,
        session_id: str,
        user_id: str,
        summary: str,
        by_host: bool,
        *,
        tenant_id: str = DEFAULT_TENANT,
        turn_index: int = 0,
    ) -> bool:
        """Set the session's summary; an automatic one (``by_host`` False) does not replace
        one the host set, nor one made after a later turn (``turn_index``: the turn it
        was made after). Returns whether it was set. Raises SessionNotFound unless the
        user of the tenant owns the session."""
        # One statement, committed by itself, no lock of its own: the conflict's row lock
        # orders writers of the summary, and its condition reads the row the one before
        # left.
        try:
            cursor = await self._db.execute_alone(
                "INSERT INTO session_summaries (session_id, tenant_id, user_id, summary,"
                " updated_at, set_by_host, turn_index)"
                " SELECT id, tenant_id, user_id, ?, ?, ?, ? FROM sessions"
                " WHERE id = ? AND tenant_id = ? AND user_id = ?"
                " ON CONFLICT (session_id) DO UPDATE"
                " SET summary = excluded.summary, updated_at = excluded.updated_at,"
                " set_by_host = excluded.set_by_host, turn_index = excluded.turn_index"
                " WHERE excluded.set_by_host = 1 OR (session_summaries.set_by_host = 0"
                " AND excluded.turn_index >= session_summaries.turn_index)",
                (summary, time.time(), int(by_host), turn_index, session_id, tenant_id, user_id),
            )
        except Exception:
            # Deleted after the statement read the session and before its row was
            # checked (PostgreSQL's foreign key refuses it): not found, as below.
            if not await self._owned(session_id, tenant_id, user_id):
                raise SessionNotFound(session_id) from None
            raise
        if cursor.rowcount == 0:
            if not await self._owned(session_id, tenant_id, user_id):
                raise SessionNotFound(session_id)
            return False  # the host's summary, or a later turn's, stays
        # The lists that may show this summary: all but those leaving the session out.
        lists = self._recent.get((tenant_id, user_id))
        if lists is not None:
            for key in [k for k in lists if k[0] != session_id]:
                del lists[key]
        return True

    async def recent_session_summaries(
        self,
        user_id: str,
        exclude_session_id: str = "",
        limit: int = 3,
        *,
        tenant_id: str = DEFAULT_TENANT,
    ) -> list[SessionSummary]:
        """The user's most recently updated non-empty session summaries, newest first,
        leaving out ``exclude_session_id`` (the current session), each with its title.
        The summaries are shared with later calls (they are frozen)."""
        if limit <= 0:
            return []
        owner = (tenant_id, user_id)
        lists = self._recent.get(owner)
        key = (exclude_session_id, limit)
        if lists is not None and key in lists:
            self._recent.move_to_end(owner)
            return list(lists[key])
        rows = await self._db.reader.execute_fetchall(
            "SELECT ss.session_id, ss.user_id, ss.summary, ss.updated_at, s.title"
            " FROM session_summaries ss JOIN sessions s ON s.id = ss.session_id"
            " WHERE ss.tenant_id = ? AND ss.user_id = ? AND ss.session_id != ?"
            " AND ss.summary != '' ORDER BY ss.updated_at DESC LIMIT ?",
            (tenant_id, user_id, exclude_session_id, limit),
        )
        found = [
            SessionSummary(
                session_id=row["session_id"],
                user_id=row["user_id"],
                summary=row["summary"],
                updated_at=row["updated_at"],
                title=row["title"],
            )
            for row in rows
        ]
        if not self._keep:
            return found
        lists = self._recent.setdefault(owner, {})
        if len(lists) >= RECENT_CACHE_LISTS:
            lists.clear()
        lists[key] = found
        self._recent.move_to_end(owner)
        if len(self._recent) > RECENT_CACHE_USERS:
            self._recent.popitem(last=False)
        return list(found)

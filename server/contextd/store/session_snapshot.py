"""What a session-mode build reads with its session, in one statement where other processes
write the database (PostgreSQL): the session's row and version, the catalog's version, the
user's other sessions' summaries, whether the user has any memory (a memory search for a
user without any then reads nothing), and, unless this process keeps them at that version,
the session's active compression summary and newest messages.

The repositories keep the session's newest messages, its compression summary and the
catalog in memory on either engine. With this process the database's only writer (SQLite)
they are always current and the build reads them through the repositories as they are.
Where replicas write too, a kept read answers only a call that read the version it was
kept at (store/tail_cache.py has the rule): the statement here reads those versions and
hands them, with whatever it read, to the repositories, and the build names the versions
in its reads. A build thus makes one round trip for all of this when its session did not
change since this process last read or wrote it, and the same one round trip otherwise.
Where the workers of one server share an SQLite file, the versions are checked the same
way, read with the session in a statement of SQLite's own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from contextd.core.identity import DEFAULT_TENANT
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.models import CompressionSummaryRow, Session, SessionSummary
from contextd.store.sessions import SessionRepo, session_from_row
from contextd.store.summaries import SummaryRepo

# Parameters: session, tenant, the versions this process keeps the tail and the active
# compression summary at (-1: none), tokenizer, window, user, recent.
_SNAPSHOT_SQL = (
    "SELECT s.id, s.user_id, s.scenario, s.host, s.title, s.metadata, s.created_at,"
    " s.updated_at, s.message_count, s.tenant_id, s.version,"
    " (SELECT version FROM cache_versions WHERE name = 'catalog') AS catalog_version,"
    " s.version <> :compression_at AS compression_read,"
    " CASE WHEN s.version <> :compression_at THEN ("
    "  SELECT json_build_array(id, message_ids, start_message_id, summary, created_at)"
    "  FROM compression_summaries WHERE session_id = s.id AND active = 1) END AS compression,"
    " CASE WHEN s.version <> :tail_at THEN ("
    "  SELECT json_agg(json_build_array(w.id, w.session_id, w.user_id, w.seq, w.role,"
    "   w.content, w.tool_calls, w.tool_call_id, w.turn_index, w.is_collected, w.status,"
    "   w.created_at, w.parts, w.tokens) ORDER BY w.seq DESC)"
    "  FROM (SELECT c.*, t.tokens FROM conversation c"
    "   LEFT JOIN message_tokens t ON t.message_id = c.id AND t.tokenizer = :tokenizer"
    "   WHERE c.session_id = s.id AND c.tenant_id = s.tenant_id"
    "   ORDER BY c.seq DESC LIMIT :window) w) END AS tail,"
    " (SELECT json_agg(json_build_array(r.session_id, r.user_id, r.summary, r.updated_at,"
    "   r.title) ORDER BY r.updated_at DESC)"
    "  FROM (SELECT ss.session_id, ss.user_id, ss.summary, ss.updated_at, o.title"
    "   FROM session_summaries ss JOIN sessions o ON o.id = ss.session_id"
    "   WHERE ss.tenant_id = s.tenant_id AND ss.user_id = :user AND ss.session_id <> s.id"
    "   AND ss.summary <> '' ORDER BY ss.updated_at DESC LIMIT :recent) r) AS recent,"
    " EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = s.tenant_id"
    "  AND m.user_id = :user) AS memories_stored"
    " FROM sessions s WHERE s.id = :session AND s.tenant_id = :tenant"
)


# The same on SQLite, but for the tail (read by the repository when not kept) and the
# user's other sessions' summaries. Parameters: session, tenant, the version the active
# compression summary is kept at (-1: none), the user.
_SQLITE_SNAPSHOT_SQL = (
    "SELECT s.id, s.user_id, s.scenario, s.host, s.title, s.metadata, s.created_at,"
    " s.updated_at, s.message_count, s.tenant_id, s.version,"
    " (SELECT version FROM cache_versions WHERE name = 'catalog') AS catalog_version,"
    " s.version <> :compression_at AS compression_read,"
    " CASE WHEN s.version <> :compression_at THEN ("
    "  SELECT json_array(id, message_ids, start_message_id, summary, created_at)"
    "  FROM compression_summaries WHERE session_id = s.id AND active = 1) END AS compression,"
    " EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = s.tenant_id"
    "  AND m.user_id = :user) AS memories_stored"
    " FROM sessions s WHERE s.id = :session AND s.tenant_id = :tenant"
)


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """A session as a build reads it, and the versions its reads name (None where no
    other process writes: kept reads are always current)."""

    session: Session
    version: int | None
    catalog_version: int | None
    # The user's other sessions' summaries, newest first (``recent`` of them at most).
    recent: list[SessionSummary]
    # Whether the user has any memory (None: not read; the memory layer knows where it is
    # the database's only writer). False lets the memory search skip its reads.
    memories_stored: bool | None = None


class SessionSnapshots:
    def __init__(
        self,
        db: Database,
        sessions: SessionRepo,
        conversation: ConversationRepo,
        summaries: SummaryRepo,
    ) -> None:
        self._db = db
        self._sessions = sessions
        self._conversation = conversation
        self._summaries = summaries

    async def read(
        self,
        session_id: str,
        *,
        tenant_id: str = DEFAULT_TENANT,
        tokenizer: str,
        window: int,
        user_id: str,
        recent: int,
        known: Session | None = None,
    ) -> SessionSnapshot | None:
        """The tenant's session (None: there is none) with ``user_id``'s ``recent`` latest
        summaries of their other sessions; where other processes write, its newest
        ``window`` messages (counted with ``tokenizer``) are read with it unless kept.
        ``known``: the session, when the caller read it already (used where nothing
        else is read with it)."""
        if self._db.engine == "sqlite" and self._db.shared_between_processes:
            return await self._read_versions(session_id, tenant_id, user_id, recent)
        if not self._db.shared_between_processes:
            session = known or await self._sessions.get(session_id, tenant_id=tenant_id)
            if session is None:
                return None
            others = await self._summaries.recent_session_summaries(
                user_id, session_id, recent, tenant_id=tenant_id
            )
            return SessionSnapshot(session, None, None, others)
        tail_at = self._conversation.tail_version(session_id, tenant_id=tenant_id)
        compression_at = self._summaries.active_version(session_id)
        rows = await self._db.reader.execute_fetchall(
            _SNAPSHOT_SQL,
            {
                "session": session_id,
                "tenant": tenant_id,
                "tail_at": -1 if tail_at is None else tail_at,
                "compression_at": -1 if compression_at is None else compression_at,
                "tokenizer": tokenizer,
                "window": window,
                "user": user_id,
                "recent": recent,
            },
        )
        if not rows:
            return None
        row = rows[0]
        version = int(row["version"])
        tail = row["tail"]
        self._conversation.read_at(
            session_id,
            tenant_id,
            version,
            tokenizer,
            json.loads(tail) if tail is not None else [] if version != tail_at else None,
            window,
        )
        self._summaries.read_at(
            session_id, version, _compression(session_id, row["compression"]),
            bool(row["compression_read"]),
        )  # fmt: skip
        listed = json.loads(row["recent"]) if row["recent"] is not None else []
        others = [SessionSummary(*item) for item in listed]
        return SessionSnapshot(
            session_from_row(row),
            version,
            int(row["catalog_version"]),
            others,
            bool(row["memories_stored"]),
        )

    async def _read_versions(
        self, session_id: str, tenant_id: str, user_id: str, recent: int
    ) -> SessionSnapshot | None:
        """The snapshot where the workers of one server share an SQLite file: the
        session with its version, the catalog's and, unless kept at that version, the
        active compression summary, in one statement; the newest messages are read
        afterwards by the repository, at or after that version (rows kept at another
        version are not used). A statement here is a call into this process's SQLite,
        not a round trip: the user's other sessions' summaries are a second one."""
        compression_at = self._summaries.active_version(session_id)
        rows = await self._db.reader.execute_fetchall(
            _SQLITE_SNAPSHOT_SQL,
            {
                "session": session_id,
                "tenant": tenant_id,
                "compression_at": -1 if compression_at is None else compression_at,
                "user": user_id,
            },
        )
        if not rows:
            return None
        row = rows[0]
        version = int(row["version"])
        self._summaries.read_at(
            session_id, version, _compression(session_id, row["compression"]),
            bool(row["compression_read"]),
        )  # fmt: skip
        others = await self._summaries.recent_session_summaries(
            user_id, session_id, recent, tenant_id=tenant_id
        )
        return SessionSnapshot(
            session_from_row(row),
            version,
            int(row["catalog_version"]),
            others,
            bool(row["memories_stored"]),
        )


def _compression(session_id: str, text: str | None) -> CompressionSummaryRow | None:
    if text is None:
        return None
    mid, message_ids, start, summary, created_at = json.loads(text)
    ids: Any = json.loads(message_ids)
    return CompressionSummaryRow(
        mid, session_id, tuple(int(m) for m in ids), start, summary, True, created_at
    )

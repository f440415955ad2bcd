"""Sessions: create, read, list a user's sessions newest first, delete with everything in them.

A user is (tenant_id, user_id); every read names the tenant, so a session of another
tenant is never found, whatever its id.

A session as a build reads it (``SessionSnapshots``): what a session-mode build reads with
its session, in one statement where other processes write the database (PostgreSQL): the
session's row and version, the catalog's version, the user's other sessions' summaries,
whether the user has any memory (a memory search for a user without any then reads
nothing), and, unless this process keeps them at that version, the session's active
compression summary and newest messages.

The repositories keep the session's newest messages, its compression summary and the
catalog in memory on either engine. With this process the database's only writer (SQLite)
they are always current and the build reads them through the repositories as they are.
Where replicas write too, a kept read answers only a call that read the version it was
kept at (store/conversation_reads.py has the rule): the statement here reads those
versions and hands them, with whatever it read, to the repositories, and the build names
the versions in its reads. A build thus makes one round trip for all of this when its
session did not change since this process last read or wrote it, and the same one round
trip otherwise. Where the workers of one server share an SQLite file, the versions are
checked the same way, read with the session in a statement of SQLite's own.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contextd.core.errors import SessionNotFound
from contextd.core.identity import DEFAULT_TENANT
from contextd.store.engine.database import Connection, Database
from contextd.store.models import CompressionSummaryRow, Session, SessionSummary, UsageTotals
from contextd.store.paging import decode_token, encode_token, page_limit

if TYPE_CHECKING:
    from contextd.store.conversation_reads import ConversationReads
    from contextd.store.summaries import SummaryRepo

_COLUMNS = (
    "id, user_id, scenario, host, title, metadata, created_at, updated_at, message_count, tenant_id"
)


def columns(prefix: str) -> str:
    """The columns ``session_from_row`` reads, each after ``prefix`` (a table's alias)."""
    return ", ".join(prefix + name for name in _COLUMNS.split(", "))


def session_from_row(row: Any) -> Session:
    metadata = row["metadata"]
    return Session(
        id=row["id"],
        user_id=row["user_id"],
        scenario=row["scenario"],
        host=row["host"],
        title=row["title"],
        metadata=json.loads(metadata) if metadata else {},
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        message_count=row["message_count"],
        tenant_id=row["tenant_id"],
    )


class SessionRepo:
    def __init__(self, db: Database) -> None:
        self._db = db

    @property
    def db(self) -> Database:
        return self._db

    async def create(
        self,
        user_id: str,
        scenario: str = "",
        host: str = "",
        title: str = "",
        metadata: Mapping[str, str] | None = None,
        *,
        tenant_id: str = DEFAULT_TENANT,
    ) -> Session:
        if not user_id:
            raise ValueError("user_id must not be empty")
        now = time.time()
        session = Session(
            id=uuid.uuid4().hex,
            user_id=user_id,
            scenario=scenario,
            host=host,
            title=title,
            metadata=dict(metadata or {}),
            created_at=now,
            updated_at=now,
            tenant_id=tenant_id,
        )
        # One statement, committed by itself: on PostgreSQL no BEGIN and COMMIT around it.
        await self._db.execute_alone(
            f"INSERT INTO sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
            (
                session.id,
                user_id,
                scenario,
                host,
                title,
                json.dumps(session.metadata, ensure_ascii=False),
                now,
                now,
                tenant_id,
            ),
        )
        for note in self._db.session_created:
            note(tenant_id, session.id)
        return session

    async def get(self, session_id: str, *, tenant_id: str = DEFAULT_TENANT) -> Session | None:
        """The tenant's session whichever of its users owns it: the caller checks the user."""
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_COLUMNS} FROM sessions WHERE id = ? AND tenant_id = ?",
            (session_id, tenant_id),
        )
        for row in rows:
            return session_from_row(row)
        return None

    async def list_sessions(
        self,
        user_id: str,
        page_size: int = 0,
        page_token: str = "",
        *,
        tenant_id: str = DEFAULT_TENANT,
    ) -> tuple[list[Session], str]:
        """A page of the user's sessions, most recently updated first (ties: id descending).

        Returns the sessions and the token of the next page ("" after the last page).
        Sessions created after the first page sort before it and never shift later pages;
        a session that gets a new message meanwhile moves to the front.
        """
        limit = page_limit(page_size)
        if page_token:
            updated_at, last_id = decode_token(page_token, "sessions", user_id, (float, str))
            rows = await self._db.reader.execute_fetchall(
                f"SELECT {_COLUMNS} FROM sessions WHERE tenant_id = ? AND user_id = ?"
                " AND (updated_at, id) < (?, ?) ORDER BY updated_at DESC, id DESC LIMIT ?",
                (tenant_id, user_id, updated_at, last_id, limit + 1),
            )
        else:
            rows = await self._db.reader.execute_fetchall(
                f"SELECT {_COLUMNS} FROM sessions WHERE tenant_id = ? AND user_id = ?"
                " ORDER BY updated_at DESC, id DESC LIMIT ?",
                (tenant_id, user_id, limit + 1),
            )
        sessions = [session_from_row(row) for row in rows]
        if len(sessions) <= limit:
            return sessions, ""
        del sessions[limit:]
        last = sessions[-1]
        return sessions, encode_token("sessions", user_id, [last.updated_at, last.id])

    async def delete(self, session_id: str, *, tenant_id: str = DEFAULT_TENANT) -> bool:
        """Delete the tenant's session with its messages, token counts and summaries (not
        memories)."""
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "DELETE FROM sessions WHERE id = ? AND tenant_id = ?", (session_id, tenant_id)
            )
            deleted = cursor.rowcount > 0
        for forget in self._db.session_deleted:
            forget(tenant_id, session_id)
        return deleted


# A turn's usage added to the session's totals: the SET list (its parameters:
# ``usage_added``) and the totals it returns.
USAGE_ADDED_SQL = (
    "prompt_tokens = prompt_tokens + ?, completion_tokens = completion_tokens + ?,"
    " prompt_tokens_estimate = prompt_tokens_estimate + ?,"
    " cache_read_tokens = cache_read_tokens + ?, cache_write_tokens = cache_write_tokens + ?,"
    " estimated_turns = estimated_turns + ?"
)
USAGE_TOTALS_SQL = (
    "prompt_tokens, completion_tokens, prompt_tokens_estimate, cache_read_tokens,"
    " cache_write_tokens, estimated_turns"
)


def usage_added(usage: UsageTotals) -> tuple[object, ...]:
    """The parameters of ``USAGE_ADDED_SQL``."""
    return (*usage[:5], int(usage.estimated))


def totals_from_row(row: Any) -> UsageTotals:
    """The session's totals from a row with ``USAGE_TOTALS_SQL``'s columns."""
    return usage_totals(row, int(row["estimated_turns"]) > 0)


async def add_usage(
    conn: Connection, session_id: str, usage: UsageTotals, *, next_version: bool = False
) -> tuple[UsageTotals, int | None]:
    """Add one turn's usage inside the caller's write transaction; return the session's
    totals (estimated when any turn's usage was) and, with ``next_version``, the session's
    version moved on in the same statement (as ``Database.next_session_version``, which it
    stands in for). Raises SessionNotFound."""
    moved = ", version = version + 1" if next_version else ""
    rows = await conn.execute_fetchall(
        f"UPDATE sessions SET {USAGE_ADDED_SQL}{moved} WHERE id = ?"
        f" RETURNING {USAGE_TOTALS_SQL}{', version' if moved else ''}",
        (*usage_added(usage), session_id),
    )
    row = rows[0] if rows else None
    if row is None:
        raise SessionNotFound(session_id)
    version = int(row["version"]) if next_version else None
    return totals_from_row(row), version


def usage_totals(row: Any, estimated: bool) -> UsageTotals:
    """UsageTotals from a row with a column of each figure, named as UsageTotals' fields."""
    return UsageTotals(
        prompt_tokens=int(row["prompt_tokens"]),
        completion_tokens=int(row["completion_tokens"]),
        prompt_tokens_estimate=int(row["prompt_tokens_estimate"]),
        cache_read_tokens=int(row["cache_read_tokens"]),
        cache_write_tokens=int(row["cache_write_tokens"]),
        estimated=estimated,
    )


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


@dataclass(frozen=True, slots=True)
class SessionSnapshots:
    _db: Database
    _sessions: SessionRepo
    _conversation: ConversationReads
    _summaries: SummaryRepo

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
        return _snapshot(row, [SessionSummary(*item) for item in listed])

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
        return _snapshot(row, others)


def _snapshot(row: Any, others: list[SessionSummary]) -> SessionSnapshot:
    """The snapshot a row of either engine's snapshot statement gives."""
    return SessionSnapshot(
        session_from_row(row),
        int(row["version"]),
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

"""Sessions: create, read, list a user's sessions newest first, delete with everything in them.

A user is (tenant_id, user_id); every read names the tenant, so a session of another
tenant is never found, whatever its id.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple

from contextd.core.errors import SessionNotFound
from contextd.core.identity import DEFAULT_TENANT
from contextd.store.engine.database import Connection, Database
from contextd.store.models import Session
from contextd.store.paging import decode_token, encode_token, page_limit

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
        async with self._db.transaction() as conn:
            await conn.execute(
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


class UsageTotals(NamedTuple):
    """Token usage summed over model calls."""

    # As providers reported it, or counted by contextd where ``estimated``; every input
    # token, the cached ones included.
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_estimate: int = 0  # contextd's own count before each call
    cache_read_tokens: int = 0  # of prompt_tokens: read from the provider's prompt cache
    cache_write_tokens: int = 0  # of prompt_tokens: written to it
    # Some figure was counted by contextd: the provider reported none for a call.
    estimated: bool = False


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

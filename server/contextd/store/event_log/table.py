"""PostgreSQL's event log: what store/event_log/files.py keeps in files, one row per line
(table event_lines, numbered per session from 1), since replicas share no disk.

A line is the same JSON text the file log writes, so a session's export is byte for byte
the same on either engine. An append is one statement: it takes the session's next line
number from event_log_ends (locking that row until it commits) and inserts the line, so
concurrent appends to a session never share or skip a number. Reads page through the
lines that existed when the read started, as a file read is a snapshot of the file.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import asyncpg

from contextd.core.identity import check_tenant_id
from contextd.store.engine.database import Connection, Database, JoinedWrite
from contextd.store.models import check_session_id

if TYPE_CHECKING:
    from contextd.store.engine.postgresql import PostgresDatabase

# Lines read per statement.
PAGE = 500

# Run on its own, outside a transaction block: PostgreSQL commits the one statement by
# itself, one round trip where BEGIN, the statement and COMMIT would take three.
# A session's lines go with it (foreign keys, ON DELETE CASCADE): a line for a session
# that is gone (deleted while its turn ran) is not written.
# The lines ($3, in order) in one statement: the end row moves on by their number.
_APPEND_MANY = (
    "WITH next AS ("
    " INSERT INTO event_log_ends (tenant_id, session_id, last_line)"
    " SELECT $1, $2, cardinality($3::text[])"
    " WHERE EXISTS (SELECT 1 FROM sessions WHERE id = $2)"
    " ON CONFLICT (tenant_id, session_id)"
    " DO UPDATE SET last_line = event_log_ends.last_line + cardinality($3::text[])"
    " RETURNING last_line)"
    " INSERT INTO event_lines (tenant_id, session_id, line, data)"
    " SELECT $1, $2, next.last_line - cardinality($3::text[]) + d.n, d.data"
    " FROM next, unnest($3::text[]) WITH ORDINALITY AS d (data, n)"
)

# The lines (the first parameter, in order) as parts of another write's WITH statement
# (JoinedWrite), numbered as above, and written only with the row of that statement's
# own write (``written``, the session's). Parameters: the lines, the tenant, the session.
_JOINED_LINES = (
    "log_lines (data) AS (SELECT CAST(? AS TEXT[])),"
    " log_end AS (INSERT INTO event_log_ends (tenant_id, session_id, last_line)"
    " SELECT ?, ?, cardinality(l.data) FROM log_lines l WHERE {condition}"
    " ON CONFLICT (tenant_id, session_id)"
    " DO UPDATE SET last_line = event_log_ends.last_line + excluded.last_line"
    " RETURNING tenant_id, session_id, last_line),"
    " log_added AS (INSERT INTO event_lines (tenant_id, session_id, line, data)"
    " SELECT e.tenant_id, e.session_id, e.last_line - cardinality(l.data) + d.n, d.data"
    " FROM log_end e, log_lines l, unnest(l.data) WITH ORDINALITY AS d (data, n))"
)


class TableLog:
    """The sessions' logs as rows (``SessionLogs`` of store/event_log/events.py)."""

    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db

    async def write(self, session_id: str, tenant_id: str, lines: list[str]) -> None:
        """The lines after the session's last, in one statement that commits by itself.
        The session id comes checked, with the events (EventStore)."""
        check_tenant_id(tenant_id)
        try:
            async with self._db.connection() as conn:
                await conn.execute(_APPEND_MANY, tenant_id, session_id, lines)
        except asyncpg.ForeignKeyViolationError:  # deleted between the check and the insert
            pass

    def joined(self, session_id: str, tenant_id: str, lines: list[str]) -> JoinedWrite:
        check_tenant_id(tenant_id)
        return JoinedWrite(
            # In the other write's transaction, which holds the session's row.
            f"WITH {_JOINED_LINES.format(condition='TRUE')} SELECT 1",
            _JOINED_LINES.format(condition="EXISTS (SELECT 1 FROM written)"),
            (lines, tenant_id, session_id),
        )

    async def read(
        self, session_id: str, after_line: int, tenant_id: str
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield the session's events in order, skipping the first ``after_line``."""
        check_session_id(session_id)
        check_tenant_id(tenant_id)
        reader = self._db.reader
        ends = await reader.execute_fetchall(
            "SELECT last_line FROM event_log_ends WHERE tenant_id = ? AND session_id = ?",
            (tenant_id, session_id),
        )
        last = int(ends[0]["last_line"]) if ends else 0
        after = after_line
        while after < last:
            rows = await reader.execute_fetchall(
                "SELECT line, data FROM event_lines WHERE tenant_id = ? AND session_id = ?"
                " AND line > ? AND line <= ? ORDER BY line LIMIT ?",
                (tenant_id, session_id, after, last, PAGE),
            )
            if not rows:  # deleted under the read
                return
            for row in rows:
                yield json.loads(row["data"])
            after = int(rows[-1]["line"])

    async def last(self, session_id: str, tenant_id: str) -> dict[str, Any] | None:
        """The session's last event; None when it has none."""
        check_session_id(session_id)
        check_tenant_id(tenant_id)
        rows = await self._db.reader.execute_fetchall(
            "SELECT data FROM event_lines WHERE tenant_id = ? AND session_id = ?"
            " ORDER BY line DESC LIMIT 1",
            (tenant_id, session_id),
        )
        return json.loads(rows[0]["data"]) if rows else None

    async def delete(self, session_id: str, tenant_id: str) -> bool:
        """Remove the session's lines; True if there were any. A later append starts again
        at line 1, as a new file would."""
        check_session_id(session_id)
        check_tenant_id(tenant_id)
        async with self._db.transaction() as conn:
            ends = await conn.execute(
                "DELETE FROM event_log_ends WHERE tenant_id = ? AND session_id = ?",
                (tenant_id, session_id),
            )
            await conn.execute(
                "DELETE FROM event_lines WHERE tenant_id = ? AND session_id = ?",
                (tenant_id, session_id),
            )
        return ends.rowcount > 0

    async def deleted_with_sessions(
        self, conn: Connection, session_ids: Sequence[str]
    ) -> int | None:
        """The logs go with their sessions' rows (foreign keys, ON DELETE CASCADE)."""
        rows = await conn.execute_fetchall(
            "SELECT COUNT(*) AS logs FROM event_log_ends"
            " WHERE session_id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(session_ids)),),
        )
        return int(rows[0]["logs"])


class TableLines:
    """The event_lines rows as lines of text (EventLines), for ``contextd store copy``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def batches(self, tenant_id: str, session_id: str) -> AsyncIterator[list[str]]:
        after = 0
        while True:
            rows = await self._db.reader.execute_fetchall(
                "SELECT line, data FROM event_lines WHERE tenant_id = ? AND session_id = ?"
                " AND line > ? ORDER BY line LIMIT ?",
                (tenant_id, session_id, after, PAGE),
            )
            if not rows:
                return
            yield [str(row["data"]) for row in rows]
            after = int(rows[-1]["line"])

    async def count(self, tenant_id: str, session_id: str) -> int:
        rows = await self._db.reader.execute_fetchall(
            "SELECT COUNT(*) AS line_count FROM event_lines WHERE tenant_id = ? AND session_id = ?",
            (tenant_id, session_id),
        )
        return int(rows[0]["line_count"])

    async def write(
        self, tenant_id: str, session_id: str, batches: AsyncIterator[list[str]]
    ) -> int:
        written = 0
        async with self._db.transaction() as conn:
            async for lines in batches:
                await conn.executemany(
                    "INSERT INTO event_lines (tenant_id, session_id, line, data)"
                    " VALUES (?, ?, ?, ?)",
                    [
                        (tenant_id, session_id, written + number, line)
                        for number, line in enumerate(lines, start=1)
                    ],
                )
                written += len(lines)
            if written:
                await conn.execute(
                    "INSERT INTO event_log_ends (tenant_id, session_id, last_line)"
                    " VALUES (?, ?, ?) ON CONFLICT (tenant_id, session_id)"
                    " DO UPDATE SET last_line = excluded.last_line",
                    (tenant_id, session_id, written),
                )
        return written

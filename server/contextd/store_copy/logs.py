"""Copying the sessions' event logs between engines (``contextd store copy``): the files
under a data directory's history/ (SQLite) and PostgreSQL's event_lines table hold the same
lines, so a log is copied line for line, as text (``Store.event_lines``), and its export
stays byte for byte the same.

The logs of the source's sessions are copied, a batch of lines at a time. A log the target
lacks (or holds empty) is written whole; one it holds with the same lines is left alone;
one it holds with other lines stops the copy (CopyConflict). A log whose session is gone
(a deletion that a crash cut short, which the server removes at its next start) is left
out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from contextd.store.engine.database import Database
from contextd.store.event_log.events import EventLines
from contextd.store_copy.tables import BATCH, CopyConflict, TableCount

# The name the counts give the event logs' lines.
EVENT_LINES = "event log lines"


async def _sessions(db: Database) -> AsyncIterator[list[tuple[str, str]]]:
    """The database's sessions as (tenant id, session id), a batch at a time."""
    last = None
    while True:
        where = "" if last is None else " WHERE rowid > ?"
        rows = await db.reader.execute_fetchall(
            f"SELECT tenant_id, id, rowid FROM sessions{where} ORDER BY rowid LIMIT ?",
            (*(() if last is None else (last,)), BATCH),
        )
        if not rows:
            return
        yield [(str(row["tenant_id"]), str(row["id"])) for row in rows]
        last = rows[-1]["rowid"]


async def count_lines(db: Database, logs: EventLines) -> int:
    """The lines of the logs of every session of ``db``."""
    total = 0
    async for sessions in _sessions(db):
        for tenant_id, session_id in sessions:
            total += await logs.count(tenant_id, session_id)
    return total


async def _lines(batches: AsyncIterator[list[str]]) -> AsyncIterator[str]:
    async for lines in batches:
        for line in lines:
            yield line


async def _same(first: AsyncIterator[str], second: AsyncIterator[str]) -> bool:
    while True:
        a = await anext(first, None)
        b = await anext(second, None)
        if a != b:
            return False
        if a is None:
            return True


async def copy_logs(
    source: Database, source_logs: EventLines, target: Database, target_logs: EventLines
) -> TableCount:
    """Copy the logs of the source's sessions that the target lacks."""
    count = TableCount(EVENT_LINES, target_before=await count_lines(target, target_logs))
    async for sessions in _sessions(source):
        for tenant_id, session_id in sessions:
            lines = await source_logs.count(tenant_id, session_id)
            if not lines:
                continue
            count.source += lines
            there = await target_logs.count(tenant_id, session_id)
            if not there:
                count.copied += await target_logs.write(
                    tenant_id, session_id, source_logs.batches(tenant_id, session_id)
                )
                continue
            same = there == lines and await _same(
                _lines(source_logs.batches(tenant_id, session_id)),
                _lines(target_logs.batches(tenant_id, session_id)),
            )
            if not same:
                raise CopyConflict(
                    f"the target's event log of session {session_id} (tenant {tenant_id}) "
                    "differs from the source's: the logs before it were copied, it and "
                    "those after it were not"
                )
            count.present += lines
    count.target = await count_lines(target, target_logs)
    return count

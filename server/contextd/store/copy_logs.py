"""Copying the sessions' event logs between engines (``contextd store copy``): the files
under a data directory's history/ (store/events.py) and PostgreSQL's event_lines table
(store/pg_events.py) hold the same lines, so a log is copied line for line, as text, and
its export stays byte for byte the same.

The logs of the source's sessions are copied, a batch of lines at a time. A log the target
lacks (or holds empty) is written whole; one it holds with the same lines is left alone;
one it holds with other lines stops the copy (CopyConflict). A log whose session is gone
(a deletion that a crash cut short, which the server removes at its next start) is left
out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

from contextd.core.identity import DEFAULT_TENANT, TENANT_ID_RULE, is_tenant_id
from contextd.store.copy_tables import BATCH, CopyConflict, TableCount
from contextd.store.engine.database import Database
from contextd.store.events import check_session_id

_READ_CHUNK = 256 * 1024
# The name the counts give the event logs' lines.
EVENT_LINES = "event log lines"


class LogLines(Protocol):
    """A session's event log as lines of text (without their newlines)."""

    def batches(self, tenant_id: str, session_id: str) -> AsyncIterator[list[str]]: ...

    async def count(self, tenant_id: str, session_id: str) -> int: ...

    async def write(
        self, tenant_id: str, session_id: str, batches: AsyncIterator[list[str]]
    ) -> int:
        """Write a log the store holds no line of; how many lines were written."""


class FileLines:
    """A data directory's event log files (a torn last line is not a line)."""

    def __init__(self, history_dir: Path) -> None:
        self._dir = history_dir

    def _path(self, tenant_id: str, session_id: str) -> Path:
        name = f"{check_session_id(session_id)}.jsonl"
        if tenant_id == DEFAULT_TENANT:
            return self._dir / name
        if not is_tenant_id(tenant_id):
            raise ValueError(f"tenant_id: {TENANT_ID_RULE}, got {tenant_id!r}")
        return self._dir / "tenants" / tenant_id / name

    async def batches(self, tenant_id: str, session_id: str) -> AsyncIterator[list[str]]:
        for lines in _file_batches(self._path(tenant_id, session_id)):
            yield lines

    async def count(self, tenant_id: str, session_id: str) -> int:
        return _count_lines(self._path(tenant_id, session_id))

    async def write(
        self, tenant_id: str, session_id: str, batches: AsyncIterator[list[str]]
    ) -> int:
        path = self._path(tenant_id, session_id)
        written = 0
        # Replaces what holds no whole line (nothing, or a torn line).
        with _create(path) as file:
            async for lines in batches:
                file.write("".join(line + "\n" for line in lines).encode("utf-8"))
                written += len(lines)
        if not written:
            path.unlink()
        return written


# Sync file helpers: the copy is a command of its own, with no other work on its loop.
def _file_batches(path: Path) -> Iterator[list[str]]:
    """The file's whole lines, a chunk at a time (none for a missing file)."""
    try:
        file = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return
    with file:
        rest = b""
        while chunk := file.read(_READ_CHUNK):
            *lines, rest = (rest + chunk).split(b"\n")
            if lines:
                yield [line.decode("utf-8") for line in lines]


def _count_lines(path: Path) -> int:
    lines = 0
    try:
        with open(path, "rb") as file:
            while chunk := file.read(_READ_CHUNK):
                lines += chunk.count(b"\n")
    except FileNotFoundError:
        return 0
    return lines


def _create(path: Path) -> BinaryIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "wb")


class TableLines:
    """PostgreSQL's event_lines, numbered from 1 per session."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def batches(self, tenant_id: str, session_id: str) -> AsyncIterator[list[str]]:
        after = 0
        while True:
            rows = await self._db.reader.execute_fetchall(
                "SELECT line, data FROM event_lines WHERE tenant_id = ? AND session_id = ?"
                " AND line > ? ORDER BY line LIMIT ?",
                (tenant_id, session_id, after, BATCH),
            )
            if not rows:
                return
            yield [str(row[1]) for row in rows]
            after = int(rows[-1][0])

    async def count(self, tenant_id: str, session_id: str) -> int:
        rows = await self._db.reader.execute_fetchall(
            "SELECT COUNT(*) FROM event_lines WHERE tenant_id = ? AND session_id = ?",
            (tenant_id, session_id),
        )
        return int(rows[0][0])

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


def log_lines(db: Database, data_dir: Path) -> LogLines:
    """Where the database's engine keeps the event logs (as Database.event_log)."""
    if db.engine == "sqlite":
        return FileLines(data_dir / "history")
    return TableLines(db)


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
        yield [(str(row[0]), str(row[1])) for row in rows]
        last = rows[-1][2]


async def count_lines(db: Database, logs: LogLines) -> int:
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
    source: Database, source_logs: LogLines, target: Database, target_logs: LogLines
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

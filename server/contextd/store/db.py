"""The SQLite database: one file, WAL, versioned forward-only migrations.

aiosqlite runs each connection on its own thread, so every await is a thread hop
(about 0.3 ms here): repositories batch their work into few awaits per request.
Writes go through one connection, serialized by an asyncio lock and opened with
BEGIN IMMEDIATE so a write never fails half-way on a lock upgrade; reads use a
second connection, which WAL lets run beside a write.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path

import aiosqlite

DB_FILENAME = "contextd.sqlite3"
BUSY_TIMEOUT_MS = 5000


def _migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every file NNNN_name.sql in store/migrations, in order."""
    found = []
    for entry in resources.files("contextd.store.migrations").iterdir():
        if entry.name.endswith(".sql"):
            version, _, name = entry.name.removesuffix(".sql").partition("_")
            found.append((int(version), name, entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations must be numbered 1..n without gaps, found {versions}")
    return found


async def _configure(conn: aiosqlite.Connection, synchronous: str) -> None:
    await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    await conn.execute("PRAGMA foreign_keys = ON")
    await conn.execute(f"PRAGMA synchronous = {synchronous}")


class Database:
    def __init__(self, path: Path, writer: aiosqlite.Connection, reader: aiosqlite.Connection):
        self.path = path
        self._writer = writer
        self._reader = reader
        self._write_lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path, synchronous: str = "NORMAL") -> Database:
        """Open (creating if needed) the database file and apply pending migrations.

        ``synchronous=NORMAL`` in WAL mode keeps every committed transaction through a
        process crash; ``FULL`` also through a power cut, at a large cost per commit.
        """
        if synchronous.upper() not in ("NORMAL", "FULL"):
            raise ValueError("synchronous must be NORMAL or FULL")
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = await aiosqlite.connect(path, isolation_level=None)
        reader: aiosqlite.Connection | None = None
        try:
            writer.row_factory = aiosqlite.Row
            async with writer.execute("PRAGMA journal_mode = WAL") as cursor:
                mode = await cursor.fetchone()
            if not mode or str(mode[0]).lower() != "wal":
                raise RuntimeError(f"{path}: SQLite refused WAL mode (got {mode})")
            await _configure(writer, synchronous)
            reader = await aiosqlite.connect(path, isolation_level=None)
            reader.row_factory = aiosqlite.Row
            await _configure(reader, synchronous)
            await reader.execute("PRAGMA query_only = ON")
            db = cls(path, writer, reader)
            await db._migrate()
        except BaseException:
            # aiosqlite's threads are not daemons: an unclosed connection hangs the exit.
            for conn in (reader, writer):
                if conn is not None:
                    await conn.close()
            raise
        return db

    async def close(self) -> None:
        await self._reader.close()
        await self._writer.close()

    async def _migrate(self) -> None:
        async with self.transaction() as conn:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            async with conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations") as c:
                row = await c.fetchone()
            current = int(row[0]) if row else 0
            known = _migrations()
            if current > len(known):
                raise RuntimeError(
                    f"database {self.path} has schema version {current}, newer than this "
                    f"contextd knows ({len(known)}); upgrade contextd"
                )
            for version, name, sql in known[current:]:
                for statement in _statements(sql):
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (version, name, time.time()),
                )

    async def schema_version(self) -> int:
        async with self._reader.execute("SELECT MAX(version) FROM schema_migrations") as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """A write transaction (BEGIN IMMEDIATE), committed on success, rolled back on error."""
        async with self._write_lock:
            try:
                # Inside the try: a cancel that lands while BEGIN is queued must still
                # roll back, or the connection stays inside a transaction for good.
                await self._writer.execute("BEGIN IMMEDIATE")
                yield self._writer
                await self._writer.execute("COMMIT")
            except BaseException:
                await asyncio.shield(self._rollback())
                raise

    async def _rollback(self) -> None:
        # OperationalError: no transaction was active (BEGIN never ran or COMMIT finished).
        with contextlib.suppress(sqlite3.OperationalError):
            await self._writer.execute("ROLLBACK")

    @property
    def reader(self) -> aiosqlite.Connection:
        """The connection for reads outside a write transaction."""
        return self._reader


def _statements(sql: str) -> list[str]:
    """Split a migration into statements (sqlite3.complete_statement knows about triggers)."""
    statements, buffer = [], ""
    for line in sql.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise RuntimeError(f"incomplete statement in migration: {buffer[:80]!r}")
    return statements

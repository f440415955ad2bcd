"""The SQLite database (the default engine): one file, WAL, versioned forward-only migrations.

Statements run on the event loop's thread, through plain sqlite3 connections. A thread
hop per statement (aiosqlite's model) costs several times what a request's statements
cost themselves, so a hop would be most of the work (bench/README.md, "Measured costs
behind the code"). The price is that a statement blocks the loop while it runs:
repositories keep statements indexed and bounded (pages, limits), and this process is
the file's only writer, so no statement waits on a lock. With ``--workers`` the workers
write it too: a write that finds another's lock waits for it on the loop, between tries
of BEGIN, so the worker's other calls go on meanwhile.

``SqliteConnection`` keeps an awaitable API (``await conn.execute_fetchall(...)``): callers do
not change if a statement ever has to move to a thread.

Writes go through one connection, serialized by an asyncio lock and opened with
BEGIN IMMEDIATE. Reads use the same connection: a second one would have to drop its page
cache after every write, and the next read would pay for it. Only while a write
transaction is open, its body suspended on something else, do reads go to a second,
read-only connection, so that they never see uncommitted data.

Repositories keep some reads in memory. One rule keeps those caches what the database
holds: a write changes a cache only after its transaction committed, in the same step
(no ``await`` that suspends between the end of ``async with db.transaction()`` and the
change), and a write that raised leaves the cache alone, since the rollback left the
database as it was. It holds because statements do not suspend: a read that fills a cache
cannot be overtaken between its statement and storing the result, and no read runs between
a commit and the code after it. Should statements move to a thread, that would no longer
hold and the caches would have to change.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from contextd.core.errors import StorageFull
from contextd.store.engine.database import (
    Connection,
    Database,
    Params,
    StatementObserver,
)
from contextd.store.engine.disk import DiskWatch
from contextd.store.engine.migrations import SQLITE_MIGRATIONS, migration_files
from contextd.store.engine.private import create_empty, make_dir
from contextd.tracing import spans

_SPAN_ATTRIBUTES = {"db.system": "sqlite", "db.system.name": "sqlite"}

Row = sqlite3.Row

DB_FILENAME = "contextd.sqlite3"
BUSY_TIMEOUT_MS = 5000
# A worker waiting for another's write lock tries again after these pauses, doubling.
_FIRST_PAUSE_S = 0.0002
_LAST_PAUSE_S = 0.01


class Cursor:
    """The outcome of one statement: its rows and ``rowcount``."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    async def fetchone(self) -> Row | None:
        row: Row | None = self._cursor.fetchone()
        return row

    async def __aenter__(self) -> Cursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._cursor.close()

    def __await__(self) -> Generator[Any, None, Cursor]:
        # ``cursor = await conn.execute(...)``: the statement has already run.
        return self
        yield  # a generator, as __await__ must return an iterator


class SqliteConnection:
    """An awaitable face over a sqlite3 connection used on the event loop's thread."""

    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        """Run ``sql``; await the result or use it as ``async with``."""
        return Cursor(self._conn.execute(sql, params))

    async def execute_fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        return self._conn.execute(sql, params).fetchall()

    async def executemany(self, sql: str, rows: Iterable[Params]) -> Cursor:
        return Cursor(self._conn.executemany(sql, rows))

    async def create_function(
        self, name: str, arity: int, func: Callable[..., Any], *, deterministic: bool = False
    ) -> None:
        self._conn.create_function(name, arity, func, deterministic=deterministic)

    def begin_or_busy(self) -> bool:
        """BEGIN IMMEDIATE without waiting: False when another process holds the write
        lock (its busy timeout is lifted for this statement only)."""
        self._conn.execute("PRAGMA busy_timeout = 0")
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            return True
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode == sqlite3.SQLITE_BUSY:
                return False
            raise
        finally:
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def close(self) -> None:
        self._conn.close()

    def timed(self, observe: StatementObserver) -> SqliteConnection:
        """The same connection, with each statement's seconds told to ``observe``."""
        return _TimedConnection(self._conn, observe)


class _TimedConnection(SqliteConnection):
    """A connection that times its statements: a class of its own, so that a server that
    does not time them runs the plain methods."""

    __slots__ = ("_observe",)

    def __init__(self, conn: sqlite3.Connection, observe: StatementObserver) -> None:
        super().__init__(conn)
        self._observe = observe

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        started = time.perf_counter()
        cursor = Cursor(self._conn.execute(sql, params))
        self._observe(sql, time.perf_counter() - started)
        return cursor

    async def execute_fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        started = time.perf_counter()
        rows = self._conn.execute(sql, params).fetchall()
        self._observe(sql, time.perf_counter() - started)
        return rows

    async def executemany(self, sql: str, rows: Iterable[Params]) -> Cursor:
        started = time.perf_counter()
        cursor = Cursor(self._conn.executemany(sql, rows))
        self._observe(sql, time.perf_counter() - started)
        return cursor


def _connect(path: Path, synchronous: str) -> sqlite3.Connection:
    # isolation_level=None: no implicit transactions; BEGIN IMMEDIATE is explicit.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    return conn


class SqliteDatabase(Database):
    engine = "sqlite"

    def __init__(
        self,
        path: Path,
        writer: SqliteConnection,
        reader: SqliteConnection,
        disk: DiskWatch | None = None,
        shared: bool = False,
    ):
        super().__init__(disk)
        # The workers of one server share the file (--workers): each keeps its reads
        # checked against the versions the others move on, as PostgreSQL's replicas do.
        self.shared_between_processes = shared
        self.path = path
        self._writer = writer
        self._reader = reader
        self._write_lock = asyncio.Lock()

    @classmethod
    async def open(
        cls,
        path: Path,
        synchronous: str = "NORMAL",
        disk: DiskWatch | None = None,
        *,
        shared: bool = False,
    ) -> SqliteDatabase:
        """Open (creating if needed) the database file and apply pending migrations.

        ``synchronous=NORMAL`` in WAL mode keeps every committed transaction through a
        process crash; ``FULL`` also through a power cut, at a large cost per commit.
        ``disk``, when given, is told of writes that fail for want of space, the event
        log's too; the database closes it. ``shared``: other processes of the same
        server (its workers) write the file too.
        """
        if synchronous.upper() not in ("NORMAL", "FULL"):
            raise ValueError("synchronous must be NORMAL or FULL")
        make_dir(path.parent)
        # SQLite gives the -wal and -shm files the database file's mode.
        create_empty(path)
        writer = _connect(path, synchronous)
        reader: sqlite3.Connection | None = None
        try:
            mode = writer.execute("PRAGMA journal_mode = WAL").fetchone()
            if not mode or str(mode["journal_mode"]).lower() != "wal":
                raise RuntimeError(f"{path}: SQLite refused WAL mode (got {mode})")
            reader = _connect(path, synchronous)
            reader.execute("PRAGMA query_only = ON")
            db = cls(path, SqliteConnection(writer), SqliteConnection(reader), disk, shared)
            await db._migrate()
        except BaseException:
            for conn in (reader, writer):
                if conn is not None:
                    conn.close()
            raise
        return db

    async def next_session_version(self, conn: Connection, session_id: str) -> int | None:
        if not self.shared_between_processes:
            return None
        rows = await conn.execute_fetchall(
            "UPDATE sessions SET version = version + 1 WHERE id = ? RETURNING version",
            (session_id,),
        )
        return int(rows[0]["version"]) if rows else None

    async def next_catalog_version(self, conn: Connection) -> int | None:
        if not self.shared_between_processes:
            return None
        rows = await conn.execute_fetchall(
            "UPDATE cache_versions SET version = version + 1 WHERE name = 'catalog'"
            " RETURNING version"
        )
        return int(rows[0]["version"])

    async def close(self) -> None:
        if self.disk is not None:
            await self.disk.aclose()
        self._reader.close()
        self._writer.close()

    def time_statements(self, observe: StatementObserver) -> None:
        self._writer = self._writer.timed(observe)
        self._reader = self._reader.timed(observe)

    async def size_bytes(self) -> int:
        """The database file's size and its write-ahead log's."""
        total = 0
        for path in (self.path, self.path.with_name(self.path.name + "-wal")):
            with contextlib.suppress(FileNotFoundError):
                total += path.stat().st_size
        return total

    async def _migrate(self) -> None:
        async with self.transaction() as conn:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            async with conn.execute(
                "SELECT COALESCE(MAX(version), 0) AS version FROM schema_migrations"
            ) as c:
                row = await c.fetchone()
            current = int(row["version"]) if row else 0
            known = migration_files(SQLITE_MIGRATIONS)
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
        async with self._reader.execute(
            "SELECT MAX(version) AS version FROM schema_migrations"
        ) as cursor:
            row = await cursor.fetchone()
        return int(row["version"]) if row and row["version"] is not None else 0

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqliteConnection]:
        """A write transaction (BEGIN IMMEDIATE), committed on success, rolled back on error.
        Traced as one span (its wait for the writer included), not a span per statement."""
        with spans.span("sqlite transaction", _SPAN_ATTRIBUTES):
            async with self._write_lock:
                try:
                    # Inside the try: a cancel that lands while BEGIN is queued must still
                    # roll back, or the connection stays inside a transaction for good.
                    await self._begin()
                    yield self._writer
                    await self._writer.execute("COMMIT")
                except BaseException as error:
                    await asyncio.shield(self._rollback())
                    if self.disk is not None and self.disk.noticed(error):
                        raise StorageFull() from error
                    raise

    async def _begin(self) -> None:
        """BEGIN IMMEDIATE. When workers share the file the write lock may be another's:
        wait for it on the loop, between tries, rather than in SQLite's busy handler,
        which would hold up every call of this worker while it sleeps."""
        if not self.shared_between_processes:
            await self._writer.execute("BEGIN IMMEDIATE")
            return
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        pause = _FIRST_PAUSE_S
        while not self._writer.begin_or_busy():
            if time.monotonic() >= deadline:
                raise sqlite3.OperationalError("database is locked")
            await asyncio.sleep(pause)
            pause = min(pause * 2, _LAST_PAUSE_S)

    async def execute_alone(self, sql: str, params: Params = ()) -> Cursor:
        async with self.transaction() as conn:
            return await conn.execute(sql, params)

    async def fetch_alone(
        self, sql: str, params: Params = (), *, conflict_on: str = ""
    ) -> list[Row]:
        async with self.transaction() as conn:
            return await conn.execute_fetchall(sql, params)

    async def _rollback(self) -> None:
        # OperationalError: no transaction was active (BEGIN never ran or COMMIT finished).
        with contextlib.suppress(sqlite3.OperationalError):
            await self._writer.execute("ROLLBACK")

    @property
    def reader(self) -> SqliteConnection:
        """The connection for a read: the writer's, unless a write transaction is open."""
        return self._reader if self._writer.in_transaction else self._writer

    async def create_function(
        self, name: str, arity: int, func: Callable[..., Any], *, deterministic: bool = False
    ) -> None:
        """Define an SQL function on every connection."""
        for conn in (self._writer, self._reader):
            await conn.create_function(name, arity, func, deterministic=deterministic)

    async def id_counter(self, conn: Connection, table: str, column: str) -> int:
        # AUTOINCREMENT: one counter per table, in sqlite_sequence.
        rows = await conn.execute_fetchall(
            "SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)
        )
        return int(rows[0]["seq"]) if rows else 0

    async def set_id_counter(self, conn: Connection, table: str, column: str, last: int) -> None:
        done = await conn.execute(
            "UPDATE sqlite_sequence SET seq = ? WHERE name = ?", (last, table)
        )
        if done.rowcount == 0:
            await conn.execute(
                "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (table, last)
            )


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

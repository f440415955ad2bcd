"""The PostgreSQL database: an asyncpg pool, forward-only migrations in
store/migrations_pg, the same repositories as SQLite (store/database.py).

Several replicas may share the database, so nothing here assumes this process is the
only writer: repositories keep no reads in memory (``Dialect.keeps_caches``), and writes
run at once, each on its own pooled connection in a READ COMMITTED transaction.

Every statement waits at most ``pool_timeout`` seconds for a free connection and runs
at most ``statement_timeout`` seconds (PostgreSQL's ``statement_timeout``). A database
that cannot be reached, a dropped connection, an exhausted pool and a statement that
timed out raise DatabaseUnavailable (UNAVAILABLE to callers), a full disk StorageFull.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Sequence
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from contextd.core.errors import DatabaseUnavailable, StorageFull
from contextd.store.database import POSTGRESQL, Database, Params, Row
from contextd.store.pg_events import DatabaseEventLog
from contextd.store.pg_sql import Statement, translate

# Taken by the migration transaction, so that replicas starting together migrate once.
MIGRATION_LOCK = 0x636F6E7465787464  # "contextd"
_CLOSE_TIMEOUT_S = 10.0
# Errors that say the database is out of reach, not that a statement was wrong.
_UNREACHABLE = (
    OSError,
    asyncpg.PostgresConnectionError,  # class 08, the dropped connection included
    asyncpg.exceptions.OperatorInterventionError,  # shutting down, starting up
    asyncpg.exceptions.TooManyConnectionsError,
)


def _migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every file NNNN_name.sql in store/migrations_pg, in order."""
    found = []
    for entry in resources.files("contextd.store.migrations_pg").iterdir():
        if entry.name.endswith(".sql"):
            version, _, name = entry.name.removesuffix(".sql").partition("_")
            found.append((int(version), name, entry.read_text(encoding="utf-8")))
    found.sort()
    if [v for v, _, _ in found] != list(range(1, len(found) + 1)):
        raise RuntimeError("PostgreSQL migrations must be numbered 1..n without gaps")
    return found


def _translated(error: BaseException, lost: bool = False) -> BaseException | None:
    """The domain error for a failure of the database itself, else None. ``lost``: the
    connection the error came from is closed (asyncpg then says little more than that
    it cannot go on)."""
    if lost and isinstance(error, asyncpg.InterfaceError | asyncpg.exceptions.InternalClientError):
        return DatabaseUnavailable(f"the database connection was lost: {error}")
    if isinstance(error, asyncpg.exceptions.DiskFullError):
        return StorageFull()
    if isinstance(error, asyncpg.exceptions.QueryCanceledError):
        return DatabaseUnavailable(f"a database statement was cancelled: {error}")
    if isinstance(error, _UNREACHABLE):
        return DatabaseUnavailable(f"the database cannot be reached: {error}")
    return None


def _is_lost(conn: PoolConnectionProxy[Any]) -> bool:
    """Whether the connection is closed; the pool may already have taken back one the
    server dropped, and then says so by refusing the question."""
    try:
        return conn.is_closed()
    except asyncpg.InterfaceError:
        return True


def _rowcount(status: str) -> int:
    """The row count of a command status such as ``UPDATE 3`` or ``INSERT 0 1``."""
    last = status.rpartition(" ")[2]
    return int(last) if last.isdigit() else -1


class PgCursor:
    """A statement's outcome; it runs when first awaited (or entered)."""

    __slots__ = ("_rows", "_run", "rowcount")

    def __init__(self, run: Callable[[], Awaitable[tuple[Sequence[Row], int]]]) -> None:
        self._run = run
        self._rows: Sequence[Row] = ()
        self.rowcount = -1

    async def _execute(self) -> PgCursor:
        self._rows, self.rowcount = await self._run()
        return self

    def __await__(self) -> Generator[Any, None, PgCursor]:
        return self._execute().__await__()

    async def __aenter__(self) -> PgCursor:
        return await self._execute()

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def fetchone(self) -> Row | None:
        return self._rows[0] if self._rows else None


async def _run(
    conn: PoolConnectionProxy[Any], statement: Statement, args: Sequence[Any]
) -> tuple[Sequence[Row], int]:
    if statement.returns_rows:
        rows = await conn.fetch(statement.sql, *args)
        return rows, len(rows)
    return (), _rowcount(await conn.execute(statement.sql, *args))


class PgConnection:
    """One pooled connection, inside a transaction."""

    __slots__ = ("_conn",)

    def __init__(self, conn: PoolConnectionProxy[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Params = ()) -> PgCursor:
        statement = translate(sql)
        args = statement.arguments(params)
        return PgCursor(lambda: _run(self._conn, statement, args))

    async def execute_fetchall(self, sql: str, params: Params = ()) -> Sequence[Row]:
        statement = translate(sql)
        return await self._conn.fetch(statement.sql, *statement.arguments(params))

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        statement = translate(sql)
        batch = [statement.arguments(row) for row in rows]
        if batch:
            await self._conn.executemany(statement.sql, batch)


class PgReader:
    """Reads outside a transaction: each statement on a connection of the pool."""

    __slots__ = ("_db",)

    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db

    def execute(self, sql: str, params: Params = ()) -> PgCursor:
        statement = translate(sql)
        args = statement.arguments(params)

        async def run() -> tuple[Sequence[Row], int]:
            async with self._db.connection() as conn:
                return await _run(conn, statement, args)

        return PgCursor(run)

    async def execute_fetchall(self, sql: str, params: Params = ()) -> Sequence[Row]:
        statement = translate(sql)
        args = statement.arguments(params)
        async with self._db.connection() as conn:
            return await conn.fetch(statement.sql, *args)

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        raise TypeError("the reader does not write")


class PostgresDatabase(Database):
    dialect = POSTGRESQL

    def __init__(self, pool: asyncpg.Pool[Any], pool_timeout: float) -> None:
        super().__init__()
        self._pool = pool
        self._pool_timeout = pool_timeout
        self._reader = PgReader(self)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        pool_size: int = 10,
        statement_timeout: float = 30.0,
        pool_timeout: float = 5.0,
    ) -> PostgresDatabase:
        """Connect (a pool of at most ``pool_size``) and apply pending migrations.

        Raises DatabaseUnavailable when the database cannot be reached."""
        if pool_size < 1:
            raise ValueError("the database pool needs at least one connection")
        try:
            pool = await asyncpg.create_pool(
                url,
                min_size=1,
                max_size=pool_size,
                # 0 would mean no limit: a statement is always bounded.
                server_settings={"statement_timeout": str(max(1, round(statement_timeout * 1000)))},
                timeout=pool_timeout,
            )
        except (*_UNREACHABLE, TimeoutError) as error:
            raise DatabaseUnavailable(f"the database cannot be reached: {error}") from error
        except asyncpg.PostgresError as error:  # a wrong password, no such database, ...
            raise DatabaseUnavailable(f"the database refused the connection: {error}") from error
        db = cls(pool, pool_timeout)
        try:
            await db._migrate()
        except BaseException:
            await pool.close()
            raise
        return db

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self._pool.close(), _CLOSE_TIMEOUT_S)
        except TimeoutError:
            self._pool.terminate()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[PoolConnectionProxy[Any]]:
        """A pooled connection, waiting at most ``pool_timeout`` for one; database
        failures become domain errors."""
        lost = False
        try:
            try:
                conn = await self._pool.acquire(timeout=self._pool_timeout)
            except TimeoutError as error:
                raise DatabaseUnavailable(
                    "the database pool is exhausted: no connection became free within "
                    f"{self._pool_timeout:g} s"
                ) from error
            try:
                yield conn
            finally:
                lost = _is_lost(conn)
                await self._pool.release(conn)
        except BaseException as error:
            domain = _translated(error, lost)
            if domain is None:
                raise
            raise domain from error

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PgConnection]:
        async with self.connection() as conn, conn.transaction():
            yield PgConnection(conn)

    @property
    def reader(self) -> PgReader:
        return self._reader

    async def schema_version(self) -> int:
        rows = await self._reader.execute_fetchall("SELECT MAX(version) FROM schema_migrations")
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0

    def event_log(self, history_dir: Path) -> DatabaseEventLog:
        return DatabaseEventLog(self)

    async def _migrate(self) -> None:
        known = _migrations()
        async with self.connection() as conn, conn.transaction():
            # Replicas starting together: one migrates, the others wait here and then
            # find the version already current.
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                " applied_at DOUBLE PRECISION NOT NULL)"
            )
            current = int(
                await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
            )
            if current > len(known):
                raise RuntimeError(
                    f"the database has schema version {current}, newer than this contextd "
                    f"knows ({len(known)}); upgrade contextd"
                )
            for version, name, sql in known[current:]:
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                    version,
                    name,
                    time.time(),
                )

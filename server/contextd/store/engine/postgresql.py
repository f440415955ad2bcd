"""The PostgreSQL database: an asyncpg pool, forward-only migrations in
store/engine/migrations/postgresql, the same repositories as SQLite (store/engine/database.py).

Several replicas may share the database, so nothing here assumes this process is the
only writer: repositories keep no reads in memory (``shared_between_processes``), and writes
run at once, each on its own pooled connection in a READ COMMITTED transaction.

Every statement waits at most ``pool_timeout`` seconds for a free connection and runs
at most ``statement_timeout`` seconds (PostgreSQL's ``statement_timeout``; this side
gives up a few seconds later, for a server that no longer answers at all). A database
that cannot be reached, a dropped connection, an exhausted pool and a statement that
timed out raise DatabaseUnavailable (UNAVAILABLE to callers), a full disk StorageFull.
A database out of reach is also told to ``reachability``, which probes it until it
answers. Dead connections are not reused: the pool opens a new one in their place, so
after a restart of PostgreSQL the next calls succeed without a restart of contextd.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy
from opentelemetry.trace import SpanKind

from contextd.core.errors import DatabaseUnavailable, StorageFull
from contextd.store.engine.database import (
    Connection,
    Database,
    KeyConflict,
    Params,
    Row,
    StatementObserver,
)
from contextd.store.engine.migrations import POSTGRESQL_MIGRATIONS, migration_files
from contextd.store.engine.postgresql_sql import Statement, translate
from contextd.store.engine.reachability import DatabaseWatch
from contextd.tracing import spans

_SPAN_ATTRIBUTES = {"db.system": "postgresql", "db.system.name": "postgresql"}

# Taken by the migration transaction, so that replicas starting together migrate once.
MIGRATION_LOCK = 0x636F6E7465787464  # "contextd"
_CLOSE_TIMEOUT_S = 10.0
# How much longer than the statement timeout this side waits for an answer: PostgreSQL
# cancels a slow statement itself; only a server that stopped answering (a cut network)
# is given up here.
_ANSWER_MARGIN_S = 5.0
# Errors that say the database is out of reach, not that a statement was wrong.
_UNREACHABLE = (
    OSError,
    asyncpg.PostgresConnectionError,  # class 08, the dropped connection included
    asyncpg.exceptions.OperatorInterventionError,  # shutting down, starting up
    asyncpg.exceptions.TooManyConnectionsError,
)
# What a pool's reset of a connection raises when the connection died under it.
_RELEASE_FAILURES = (
    OSError,
    TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
)


async def _keep_session(conn: asyncpg.Connection[Any]) -> None:
    """A connection's reset when it goes back to the pool: nothing beyond the rollback of
    a transaction left open, which asyncpg does first anyway. asyncpg's default reset
    (unlock advisory locks, close cursors, unlisten, reset settings) is one more round
    trip per pooled use, as many as the statements themselves in a read, and contextd
    leaves none of that behind: its advisory locks are transaction-scoped, it declares
    no cursors, listens to nothing and sets its settings when a connection opens."""


def _translated(error: BaseException, connection_lost: bool) -> BaseException | None:
    """The domain error for a failure of the database itself, else None.
    ``connection_lost``: the connection the failure came from was closed under it."""
    if isinstance(error, asyncpg.exceptions.DiskFullError):
        return StorageFull()
    if isinstance(error, asyncpg.exceptions.QueryCanceledError):
        # A timeout and a cancel by an administrator share one SQLSTATE; only the
        # message (English unless the server's lc_messages says otherwise) tells them apart.
        if "statement timeout" in str(error):
            return DatabaseUnavailable(
                "a database statement ran longer than --database-statement-timeout and "
                "was cancelled; its transaction was rolled back"
            )
        return DatabaseUnavailable(
            f"the database cancelled a statement ({error}); its transaction was rolled back"
        )
    if isinstance(error, TimeoutError):
        return DatabaseUnavailable("the database cannot be reached: it did not answer in time")
    if _out_of_reach(error, connection_lost):
        return DatabaseUnavailable(f"the database cannot be reached: {error}")
    return None


def _out_of_reach(error: BaseException, connection_lost: bool) -> bool:
    """Whether ``error`` says the database does not answer: a refused or dropped
    connection, a server shutting down, no answer to a statement in time. Not a
    cancelled statement, though PostgreSQL files it with the shutdowns (class 57)."""
    if isinstance(error, asyncpg.exceptions.QueryCanceledError):
        return False
    return connection_lost or isinstance(error, (*_UNREACHABLE, TimeoutError))


def _closed(conn: PoolConnectionProxy[Any]) -> bool:
    """Whether the pooled connection was closed under its user; asked before the user
    releases it. The pool takes a connection back itself when it closes."""
    try:
        return conn.is_closed()
    except asyncpg.InterfaceError:  # taken back already
        return True


async def _sequence(conn: Connection, table: str, column: str) -> str:
    """The identity sequence that gives ``table``'s ``column`` its ids."""
    rows = await conn.execute_fetchall(
        "SELECT pg_get_serial_sequence(?, ?) AS sequence", (table, column)
    )
    return str(rows[0]["sequence"])


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
    conn: PoolConnectionProxy[Any],
    statement: Statement,
    args: Sequence[Any],
    observe: StatementObserver | None = None,
) -> tuple[Sequence[Row], int]:
    if observe is not None:
        started = time.perf_counter()
        try:
            return await _run(conn, statement, args)
        finally:
            observe(statement.sql, time.perf_counter() - started)
    if statement.returns_rows:
        rows = await conn.fetch(statement.sql, *args)
        return rows, len(rows)
    return (), _rowcount(await conn.execute(statement.sql, *args))


class PgConnection:
    """One pooled connection, inside a transaction."""

    __slots__ = ("_conn", "_observe")

    def __init__(
        self, conn: PoolConnectionProxy[Any], observe: StatementObserver | None = None
    ) -> None:
        self._conn = conn
        self._observe = observe

    def execute(self, sql: str, params: Params = ()) -> PgCursor:
        statement = translate(sql)
        args = statement.arguments(params)
        return PgCursor(lambda: _run(self._conn, statement, args, self._observe))

    async def execute_fetchall(self, sql: str, params: Params = ()) -> Sequence[Row]:
        statement = translate(sql)
        started = time.perf_counter()
        try:
            return await self._conn.fetch(statement.sql, *statement.arguments(params))
        finally:
            if self._observe is not None:
                self._observe(statement.sql, time.perf_counter() - started)

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        statement = translate(sql)
        batch = [statement.arguments(row) for row in rows]
        if batch:
            started = time.perf_counter()
            try:
                await self._conn.executemany(statement.sql, batch)
            finally:
                if self._observe is not None:
                    self._observe(statement.sql, time.perf_counter() - started)


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
                return await _run(conn, statement, args, self._db.observe)

        return PgCursor(run)

    async def execute_fetchall(self, sql: str, params: Params = ()) -> Sequence[Row]:
        async with self._db.connection() as conn:
            return await PgConnection(conn, self._db.observe).execute_fetchall(sql, params)

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        raise TypeError("the reader does not write")


class PostgresDatabase(Database):
    engine = "postgresql"
    shared_between_processes = True
    writes_in_with = True

    def __init__(self, pool: asyncpg.Pool[Any], pool_timeout: float) -> None:
        super().__init__()
        self._pool = pool
        self._pool_timeout = pool_timeout
        self._reader = PgReader(self)
        self.observe: StatementObserver | None = None
        self._watch = DatabaseWatch(self._answers)
        self.reachability = self._watch

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
                server_settings={
                    # 0 would mean no limit: a statement is always bounded.
                    "statement_timeout": str(max(1, round(statement_timeout * 1000))),
                    # Every statement is a short indexed read or write: compiling one
                    # (a plan whose estimate passes jit_above_cost) took 30-40 ms against
                    # about 1 ms to run it (bench/HISTORY.md, memory search).
                    "jit": "off",
                },
                command_timeout=statement_timeout + _ANSWER_MARGIN_S,
                timeout=pool_timeout,
                reset=_keep_session,
            )
        except (*_UNREACHABLE, TimeoutError) as error:
            raise DatabaseUnavailable(f"the database cannot be reached: {error}") from error
        except asyncpg.PostgresError as error:  # a wrong password, no such database, ...
            raise DatabaseUnavailable(f"the database refused the connection: {error}") from error
        db = cls(pool, pool_timeout)
        try:
            await db._migrate()
        except BaseException:
            await db.close()
            raise
        return db

    async def close(self) -> None:
        await self._watch.aclose()
        try:
            await asyncio.wait_for(self._pool.close(), _CLOSE_TIMEOUT_S)
        except TimeoutError:
            self._pool.terminate()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[PoolConnectionProxy[Any]]:
        """A pooled connection, waiting at most ``pool_timeout`` for one; database
        failures become domain errors."""
        connection_lost = False
        try:
            try:
                # A timeout around the wait, not the pool's: that one runs each acquisition
                # in a task of its own, a cost every statement would pay.
                async with asyncio.timeout(self._pool_timeout):
                    conn = await self._pool.acquire()
            except TimeoutError as error:
                raise DatabaseUnavailable(
                    "the database pool is exhausted: no connection became free (or could "
                    f"be opened) within --database-pool-timeout ({self._pool_timeout:g} s)"
                ) from error
            try:
                yield conn
            except BaseException:
                connection_lost = _closed(conn)
                raise
            finally:
                await self._release(conn)
        except BaseException as error:
            domain = _translated(error, connection_lost)
            if domain is None:
                raise
            if _out_of_reach(error, connection_lost):
                self._watch.lost()
            raise domain from error

    async def _release(self, conn: PoolConnectionProxy[Any]) -> None:
        """Give the connection back to the pool. The caller's work is over by then (its
        transaction committed or rolled back), so a connection that fails the pool's
        reset, having died meanwhile, fails no call: the pool closes it and opens
        another in its place when one is needed."""
        with contextlib.suppress(*_RELEASE_FAILURES):
            await self._pool.release(conn)

    async def _answers(self) -> None:
        """Raises unless the database answers a query."""
        async with self.connection() as conn:
            await conn.fetchval("SELECT 1")

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PgConnection]:
        # One span per transaction (its wait for a connection included), none per statement.
        with spans.span("postgresql transaction", _SPAN_ATTRIBUTES, SpanKind.CLIENT):
            async with self.connection() as conn, conn.transaction():
                yield PgConnection(conn, self.observe)

    async def execute_alone(self, sql: str, params: Params = ()) -> PgCursor:
        # Outside a transaction block: PostgreSQL commits the statement by itself.
        statement = translate(sql)
        args = statement.arguments(params)
        with spans.span("postgresql transaction", _SPAN_ATTRIBUTES, SpanKind.CLIENT):
            async with self.connection() as conn:
                return await PgCursor(lambda: _run(conn, statement, args, self.observe))

    async def fetch_alone(
        self, sql: str, params: Params = (), *, conflict_on: str = ""
    ) -> list[Row]:
        statement = translate(sql)
        args = statement.arguments(params)
        with spans.span("postgresql transaction", _SPAN_ATTRIBUTES, SpanKind.CLIENT):
            async with self.connection() as conn:
                try:
                    rows, _ = await _run(conn, statement, args, self.observe)
                except asyncpg.UniqueViolationError as error:
                    if conflict_on and error.constraint_name == conflict_on:
                        raise KeyConflict(conflict_on) from None
                    raise
                return list(rows)

    @property
    def reader(self) -> PgReader:
        return self._reader

    async def lock_in_transaction(self, conn: Connection, *key: str) -> None:
        # A transaction-scoped advisory lock on a 64-bit hash of the key: two keys
        # sharing a hash only wait for each other needlessly.
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", ("\x1f".join(key),)
        )

    async def next_session_version(self, conn: Connection, session_id: str) -> int | None:
        rows = await conn.execute_fetchall(
            "UPDATE sessions SET version = version + 1 WHERE id = ? RETURNING version",
            (session_id,),
        )
        return int(rows[0]["version"]) if rows else None

    async def next_catalog_version(self, conn: Connection) -> int | None:
        rows = await conn.execute_fetchall(
            "UPDATE cache_versions SET version = version + 1 WHERE name = 'catalog'"
            " RETURNING version"
        )
        return int(rows[0]["version"])

    async def schema_version(self) -> int:
        rows = await self._reader.execute_fetchall(
            "SELECT MAX(version) AS version FROM schema_migrations"
        )
        return int(rows[0]["version"]) if rows and rows[0]["version"] is not None else 0

    async def id_counter(self, conn: Connection, table: str, column: str) -> int:
        rows = await conn.execute_fetchall(
            f"SELECT last_value, is_called FROM {await _sequence(conn, table, column)}"
        )
        return int(rows[0]["last_value"]) if rows[0]["is_called"] else 0

    async def set_id_counter(self, conn: Connection, table: str, column: str, last: int) -> None:
        await conn.execute_fetchall(
            "SELECT setval(CAST(? AS REGCLASS), ?)", (await _sequence(conn, table, column), last)
        )

    def time_statements(self, observe: StatementObserver) -> None:
        self.observe = observe

    async def size_bytes(self) -> int:
        rows = await self._reader.execute_fetchall(
            "SELECT pg_database_size(current_database()) AS size"
        )
        return int(rows[0]["size"])

    async def _migrate(self) -> None:
        known = migration_files(POSTGRESQL_MIGRATIONS)
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

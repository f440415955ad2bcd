"""What repositories code against: a database with write transactions and a reader, on
either engine (store/engine/sqlite.py, store/engine/postgresql.py).

Repository SQL is shared: it uses ``?`` or ``:name`` placeholders, which the PostgreSQL
side translates, and passes values of the column's type. Where statements differ with
the engine (a row lock, the id counters), the engine runs them, so that no repository
picks one; repositories read only what an engine does (``Database``'s traits). The
parts built over a database that differ with its engine (its event log, its memory
index) are chosen by store/open.py, which opens the database: the engine knows none.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from contextd.store.engine.disk import DiskWatch
from contextd.store.engine.reachability import DatabaseWatch

# A result row: sqlite3.Row or asyncpg.Record; repositories read it by column name.
Row = Any
Params = Sequence[Any] | Mapping[str, Any]
# Told each timed statement's SQL and the seconds it took.
StatementObserver = Callable[[str, float], None]


class Cursor(Protocol):
    """The outcome of one statement: await it, or use it as ``async with``."""

    @property
    def rowcount(self) -> int: ...

    async def fetchone(self) -> Row | None: ...

    async def __aenter__(self) -> Cursor: ...

    async def __aexit__(self, *exc: object) -> None: ...

    def __await__(self) -> Generator[Any, None, Cursor]: ...


class KeyConflict(Exception):
    """A statement read the next key of a unique index before another writer's row took
    it (``Database.fetch_alone``); it wrote nothing."""


@dataclass(frozen=True, slots=True)
class JoinedWrite:
    """A write that commits with another or not at all, in two forms with the same
    ``params``: ``sql``, one statement run in the other write's transaction; and, where
    writes go in WITH (``Database.writes_in_with``), ``in_with``, the same write as parts
    of the other's one statement (``name AS (...)``, comma-separated, named after what
    they write so that two joined writes never share a name), made to write nothing
    unless that statement's CTE ``written`` has a row (the row the statement writes
    first: store/conversation.py's session row)."""

    sql: str
    in_with: str
    params: tuple[object, ...]


class Connection(Protocol):
    """A connection inside a write transaction, or the reader."""

    def execute(self, sql: str, params: Params = ()) -> Cursor: ...

    async def execute_fetchall(self, sql: str, params: Params = ()) -> Sequence[Row]: ...

    async def executemany(self, sql: str, rows: Iterable[Params]) -> object: ...


class Database(ABC):
    # "sqlite" or "postgresql": for metrics, spans and logs.
    engine: ClassVar[str]
    # Other processes may write the database at any time (PostgreSQL's replicas, the
    # workers of one server on SQLite), so a read kept in memory could be stale: kept
    # reads are checked against versions, and a session's turns hold a lease on it
    # across processes. False where this process is the database's only writer (SQLite,
    # one server per data directory: store/engine/data_lock.py).
    shared_between_processes: bool
    # A WITH clause may hold INSERTs whose rows the statement's other parts use
    # (PostgreSQL): a write of several tables can be one statement.
    writes_in_with: ClassVar[bool] = False

    def __init__(self, disk: DiskWatch | None = None) -> None:
        # Told of a write that failed for want of space (SQLite only; open.py gives it).
        self.disk = disk
        # Told of calls that found the database server out of reach (PostgreSQL only).
        self.reachability: DatabaseWatch | None = None
        # Called with a session's tenant id and id once its creation or deletion
        # committed: repositories that cache a session's rows start or drop them.
        self.session_created: list[Callable[[str, str], None]] = []
        self.session_deleted: list[Callable[[str, str], None]] = []
        # Called with a session's id and version once a write of its messages alone
        # committed, which moved the version on to that one: what is kept at the version
        # before and such a write leaves as it was (the compression summary) moves on.
        self.messages_appended: list[Callable[[str, int], None]] = []
        # Called with a user's tenant id and id once their erasure committed (their API
        # keys with them): whoever keeps a key's row forgets it.
        self.user_erased: list[Callable[[str, str], None]] = []

    @abstractmethod
    def transaction(self) -> AbstractAsyncContextManager[Connection]:
        """A write transaction, committed on success, rolled back on error."""

    @abstractmethod
    async def execute_alone(self, sql: str, params: Params = ()) -> Cursor:
        """Run one write statement in a transaction of its own, committed once it ran:
        one round trip on PostgreSQL, where BEGIN, the statement and COMMIT take three."""

    @abstractmethod
    async def fetch_alone(
        self, sql: str, params: Params = (), *, conflict_on: str = ""
    ) -> list[Row]:
        """``execute_alone`` for a statement that returns rows: its rows. Raises
        KeyConflict, nothing written, when the statement takes a key of the unique index
        ``conflict_on`` that another writer's row took since the statement's snapshot (a
        WITH that reads the next key, then inserts it): never where writes do not run at
        once (SQLite)."""

    @property
    @abstractmethod
    def reader(self) -> Connection:
        """Where a read outside a transaction goes (it sees only committed data)."""

    async def lock_in_transaction(self, conn: Connection, *key: str) -> None:
        """Hold the lock named by ``key`` until ``conn``'s transaction ends: transactions
        that take the same lock, in any process, run one after the other. Nothing to do
        where write transactions never run at once (SQLite)."""
        return None

    async def next_session_version(self, conn: Connection, session_id: str) -> int | None:
        """Move the session's version on in ``conn``'s transaction, for a write of its
        messages or compression summaries, and hold its row until the transaction ends:
        other writers of the session wait, so that a write that reads before it writes
        (the next message's seq) reads after them. Returns the new version, which other
        processes' kept reads are checked against; None where no other process writes
        (SQLite: nothing to do) or the session does not exist."""
        return None

    async def next_catalog_version(self, conn: Connection) -> int | None:
        """``next_session_version`` for the prompt templates and skills, of every tenant."""
        return None

    @abstractmethod
    async def schema_version(self) -> int: ...

    @abstractmethod
    def time_statements(self, observe: StatementObserver) -> None:
        """Tell ``observe`` of every statement from now on (for the metrics)."""

    @abstractmethod
    async def size_bytes(self) -> int:
        """How much room the database takes."""

    @abstractmethod
    async def close(self) -> None: ...

    # --- the id counters, for the copy -------------------------------------------------

    @abstractmethod
    async def id_counter(self, conn: Connection, table: str, column: str) -> int:
        """The last id the counter of ``table``'s ``column`` gave out (0: none)."""

    @abstractmethod
    async def set_id_counter(self, conn: Connection, table: str, column: str, last: int) -> None:
        """Make the counter of ``table``'s ``column`` go on after ``last`` (for the copy,
        which inserts ids as they were)."""

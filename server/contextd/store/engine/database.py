"""What repositories code against: a database with write transactions and a reader, on
either engine (store/engine/sqlite.py, store/engine/postgresql.py; store/engine/open.py
picks one).

Repository SQL is shared: it uses ``?`` or ``:name`` placeholders, which the PostgreSQL
side translates, and passes values of the column's type. Where an engine needs other SQL,
a repository branches on ``Database.dialect``, in the smallest place it can.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from contextd.store.engine.disk import DiskWatch
from contextd.store.engine.reachability import DatabaseWatch

if TYPE_CHECKING:
    from contextd.store.events import EventStore

# A result row: sqlite3.Row or asyncpg.Record, both read by index and by column name.
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


class Connection(Protocol):
    """A connection inside a write transaction, or the reader."""

    def execute(self, sql: str, params: Params = ()) -> Cursor: ...

    async def execute_fetchall(self, sql: str, params: Params = ()) -> Sequence[Row]: ...

    async def executemany(self, sql: str, rows: Iterable[Params]) -> object: ...


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between the engines, for the few places where the code must.

    ``keeps_caches``: this process is the database's only writer, so repositories may keep
    reads in memory (SQLite). On PostgreSQL another replica may write at any time, and a
    kept read could be stale.
    ``single_writer``: write transactions never run at once (SQLite's one writer
    connection); otherwise a write that reads before it writes locks the rows it depends on.
    """

    name: str  # "sqlite" or "postgresql"
    keeps_caches: bool
    single_writer: bool


SQLITE = Dialect("sqlite", keeps_caches=True, single_writer=True)
POSTGRESQL = Dialect("postgresql", keeps_caches=False, single_writer=False)


class Database(ABC):
    dialect: Dialect

    def __init__(self) -> None:
        # Told of a write that failed for want of space (set by the server; SQLite only).
        self.disk: DiskWatch | None = None
        # Told of calls that found the database server out of reach (PostgreSQL only).
        self.reachability: DatabaseWatch | None = None
        # Called with a session's tenant id and id once its creation or deletion
        # committed: repositories that cache a session's rows start or drop them.
        self.session_created: list[Callable[[str, str], None]] = []
        self.session_deleted: list[Callable[[str, str], None]] = []

    @abstractmethod
    def transaction(self) -> AbstractAsyncContextManager[Connection]:
        """A write transaction, committed on success, rolled back on error."""

    @property
    @abstractmethod
    def reader(self) -> Connection:
        """Where a read outside a transaction goes (it sees only committed data)."""

    async def lock_in_transaction(self, conn: Connection, *key: str) -> None:
        """Hold the lock named by ``key`` until ``conn``'s transaction ends: transactions
        that take the same lock, in any process, run one after the other. Nothing to do
        where write transactions never run at once (SQLite)."""
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

    @abstractmethod
    def event_log(self, history_dir: Path) -> EventStore:
        """The sessions' event logs: files in ``history_dir`` for SQLite, a table for
        PostgreSQL (replicas share no disk)."""

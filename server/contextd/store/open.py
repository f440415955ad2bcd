"""Which database the settings name, opened with the parts of its engine: PostgreSQL for a
``--database-url``, else the SQLite file in the data directory. The only place that picks
an engine and the parts that differ with it (``Store``): the event logs (files in the
data directory for SQLite, a table for PostgreSQL, whose replicas share no disk) and the
memories' search index (FTS5 for SQLite, a tsvector column for PostgreSQL). The engines
know none of these parts; whoever opens the store hands them to the repositories."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from contextd.store.engine.database import Database
from contextd.store.engine.disk import DiskWatch
from contextd.store.engine.private import prepare_data_dir
from contextd.store.engine.sqlite import DB_FILENAME, SqliteDatabase
from contextd.store.event_log.events import HISTORY_DIR, EventLines, EventStore
from contextd.store.event_log.files import FileLines, FileLog
from contextd.store.memory.fts5_index import FtsIndex
from contextd.store.memory.index import MemoryIndex

POSTGRES_SCHEMES = ("postgresql", "postgres")


def database_url_error(url: str) -> str | None:
    """Why this server cannot open ``url`` (its password masked), or None."""
    if not url or urlsplit(url).scheme in POSTGRES_SCHEMES:
        return None
    return (
        f"--database-url {masked_url(url)!r}: only postgresql:// URLs are supported "
        "(leave it empty for SQLite in the data directory)"
    )


def check_database_url(url: str) -> None:
    """Refuse a URL this server cannot open (SystemExit with the reason)."""
    error = database_url_error(url)
    if error is not None:
        raise SystemExit(error)


def masked_url(url: str) -> str:
    """The URL with its password replaced by ***, fit for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass(frozen=True, slots=True)
class Store:
    """An open database and the parts built over it that differ with its engine."""

    db: Database
    memory_index: MemoryIndex
    # The event logs as lines of text, for ``contextd store copy`` (reading makes nothing).
    event_lines: EventLines
    _event_log: Callable[[], EventStore]

    def event_log(self) -> EventStore:
        """The sessions' event logs, made when asked: on SQLite that makes the data
        directory's history folder, which a command that never writes a log (``keys``, a
        copy's source) must not get. Its user closes it (``aclose``)."""
        return self._event_log()

    async def close(self) -> None:
        await self.db.close()


async def open_store(
    url: str,
    data_dir: Path,
    *,
    sqlite_synchronous: str = "NORMAL",
    pool_size: int = 10,
    statement_timeout: float = 30.0,
    pool_timeout: float = 5.0,
    watch_disk: bool = False,
    shared: bool = False,
) -> Store:
    """Open (and migrate) PostgreSQL's database at ``url``, or with no URL the SQLite file
    in ``data_dir``, made private first (the settings of the other engine do not apply),
    with the parts of its engine. ``watch_disk``: writes that fail for want of space are
    told apart, and the data directory's disk watched until it has room
    (``Database.disk``; SQLite only, PostgreSQL's disk is its server's). ``shared``: the
    workers of one server write the SQLite file together (PostgreSQL is always written as
    if shared)."""
    if url:
        check_database_url(url)
        return await _open_postgresql(url, pool_size, statement_timeout, pool_timeout)
    # Every command that opens a data directory (serve, keys, store copy, mcp) makes
    # it private first: NotPrivate when that cannot be done.
    prepare_data_dir(data_dir)
    disk = DiskWatch(data_dir) if watch_disk else None
    db = await SqliteDatabase.open(data_dir / DB_FILENAME, sqlite_synchronous, disk, shared=shared)
    history = data_dir / HISTORY_DIR
    return Store(db, FtsIndex(db), FileLines(history), lambda: EventStore(FileLog(history, disk)))


async def _open_postgresql(
    url: str, pool_size: int, statement_timeout: float, pool_timeout: float
) -> Store:
    # Imported here: asyncpg (15 MB resident) loads only for a server on PostgreSQL.
    from contextd.store.engine.postgresql import PostgresDatabase
    from contextd.store.event_log.table import TableLines, TableLog
    from contextd.store.memory.tsvector_index import TsvectorIndex

    db = await PostgresDatabase.open(
        url, pool_size=pool_size, statement_timeout=statement_timeout, pool_timeout=pool_timeout
    )
    return Store(db, TsvectorIndex(db), TableLines(db), lambda: EventStore(TableLog(db)))

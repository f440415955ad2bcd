"""Which database the settings name: PostgreSQL for a ``--database-url``, else the SQLite
file in the data directory. The only place that picks an engine (the event log follows:
``Database.event_log``)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from contextd.config import Settings
from contextd.store.database import Database
from contextd.store.db import DB_FILENAME, SqliteDatabase
from contextd.store.pg_db import PostgresDatabase

POSTGRES_SCHEMES = ("postgresql", "postgres")


def check_database_url(url: str) -> None:
    """Refuse a URL this server cannot open (SystemExit with the reason)."""
    if not url:
        return
    scheme = urlsplit(url).scheme
    if scheme not in POSTGRES_SCHEMES:
        raise SystemExit(
            f"--database-url {masked_url(url)!r}: only postgresql:// URLs are supported "
            "(leave it empty for SQLite in the data directory)"
        )


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


def uses_postgres(settings: Settings) -> bool:
    return bool(settings.database_url)


async def open_database(settings: Settings) -> Database:
    """Open (and migrate) the database the settings name."""
    if uses_postgres(settings):
        check_database_url(settings.database_url)
        return await PostgresDatabase.open(
            settings.database_url,
            pool_size=settings.database_pool_size,
            statement_timeout=settings.database_statement_timeout,
            pool_timeout=settings.database_pool_timeout,
        )
    return await SqliteDatabase.open(settings.data_dir / DB_FILENAME, settings.sqlite_synchronous)

"""A test's database on each engine: the store's tests (tests/store/) and the copy's
(tests/store_copy/) run every test that takes ``db`` on SQLite and on PostgreSQL, except
those marked ``sqlite_only`` (they check SQLite itself: its files, FTS5, its errors). Each
folder's conftest.py hands its tests to ``parametrize`` and opens ``db`` with ``opened``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from contextd.store.engine.database import Database
from contextd.store.engine.postgresql import PostgresDatabase
from contextd.store.engine.sqlite import SqliteDatabase

ENGINES = ("sqlite", "postgresql")
SQLITE_ONLY = "sqlite_only: the test checks SQLite itself"


def parametrize(metafunc: pytest.Metafunc) -> None:
    """Run a test that takes ``db`` on each engine (SQLite alone when marked so)."""
    if "db" in metafunc.fixturenames:
        only = metafunc.definition.get_closest_marker("sqlite_only")
        metafunc.parametrize("db", ENGINES[:1] if only else ENGINES, indirect=True)


@asynccontextmanager
async def opened(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Database]:
    """A new database of ``engine``: a file in ``tmp_path``, or a fresh PostgreSQL one."""
    database: Database
    if engine == "sqlite":
        database = await SqliteDatabase.open(tmp_path / "contextd.sqlite3")
    else:
        url = request.getfixturevalue("postgres_url")
        database = await PostgresDatabase.open(url, pool_size=4)
    try:
        yield database
    finally:
        await database.close()

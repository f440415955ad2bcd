"""The store tests' database, on both engines: every test that takes ``db`` runs on
SQLite and on PostgreSQL, except those marked ``sqlite_only`` (they check SQLite itself:
its files, FTS5, its errors)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from contextd.store.engine.database import Database
from contextd.store.engine.postgresql import PostgresDatabase
from contextd.store.engine.sqlite import SqliteDatabase

ENGINES = ("sqlite", "postgresql")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: the test checks SQLite itself")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "db" in metafunc.fixturenames:
        only = metafunc.definition.get_closest_marker("sqlite_only")
        metafunc.parametrize("db", ENGINES[:1] if only else ENGINES, indirect=True)


@pytest.fixture
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    database: Database
    if request.param == "sqlite":
        database = await SqliteDatabase.open(tmp_path / "contextd.sqlite3")
    else:
        url = request.getfixturevalue("postgres_url")
        database = await PostgresDatabase.open(url, pool_size=4)
    yield database
    await database.close()

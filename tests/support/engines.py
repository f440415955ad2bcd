"""A test's store on each engine: the store's tests (tests/store/) and the copy's
(tests/store_copy/) run every test that takes ``store`` (or ``db``, its database) on
SQLite and on PostgreSQL, except those marked ``sqlite_only`` (they check SQLite itself:
its files, FTS5, its errors). Each folder's conftest.py hands its tests to
``parametrize`` and opens ``store`` with ``opened``: the server's opener, so that a test
gets the database and the parts of its engine the server gets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from contextd.store.open import Store, open_store

ENGINES = ("sqlite", "postgresql")
SQLITE_ONLY = "sqlite_only: the test checks SQLite itself"


def parametrize(metafunc: pytest.Metafunc) -> None:
    """Run a test that takes ``store`` on each engine (SQLite alone when marked so)."""
    if "store" in metafunc.fixturenames:
        only = metafunc.definition.get_closest_marker("sqlite_only")
        metafunc.parametrize("store", ENGINES[:1] if only else ENGINES, indirect=True)


@asynccontextmanager
async def opened(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Store]:
    """A new store of ``engine``: SQLite in the data directory ``tmp_path``, or a fresh
    PostgreSQL database."""
    url = "" if engine == "sqlite" else request.getfixturevalue("postgres_url")
    store = await open_store(url, tmp_path, pool_size=4)
    try:
        yield store
    finally:
        await store.close()

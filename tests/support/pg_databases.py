"""Fresh PostgreSQL databases for tests, fast: the migrations run once, into a template
database, and each test gets a copy of it (``CREATE DATABASE ... TEMPLATE``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import pytest
from contextd.store.engine.postgresql import PostgresDatabase

from tests.support.postgres import PostgresServer, find_bin_dir, running_postgres

TEMPLATE = "contextd_template"
BACKENDS = ("sqlite", "postgresql")
Backend = Literal["sqlite", "postgresql"]


@contextmanager
def postgres_for_tests() -> Iterator[PostgresServer]:
    """A throwaway server with the migrated template database. Without PostgreSQL's
    binaries the test is skipped, except under CI (``CI`` set), where it fails."""
    if find_bin_dir() is None:
        reason = "PostgreSQL's server binaries (initdb, postgres) are not installed"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with running_postgres() as server:
        url = server.create_database(TEMPLATE)
        # Its own thread and event loop: the caller's loop may be running.
        with concurrent.futures.ThreadPoolExecutor(1) as thread:
            thread.submit(asyncio.run, _migrate(url)).result()
        yield server


async def _migrate(url: str) -> None:
    # Only the engine's migrations are wanted here; tests open the copies with the opener.
    db = await PostgresDatabase.open(url, pool_size=1)
    await db.close()


@contextmanager
def fresh_database(server: PostgresServer) -> Iterator[str]:
    """A migrated database of its own, dropped afterwards; yields its URL."""
    name = f"test_{uuid.uuid4().hex[:16]}"
    url = server.create_database(name, template=TEMPLATE)
    try:
        yield url
    finally:
        server.drop_database(name)


def database_url_for(request: pytest.FixtureRequest, backend: str) -> str:
    """The ``--database-url`` of a server on ``backend``: "" for SQLite, else a fresh
    database (left for the throwaway server to take away)."""
    if backend == "sqlite":
        return ""
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.create_database(f"server_{uuid.uuid4().hex[:16]}", template=TEMPLATE)

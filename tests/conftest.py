"""Shared fixtures: a real contextd server process on a free local port, and a throwaway
PostgreSQL (started only when a test asks for it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.pg_databases import fresh_database, postgres_for_tests
from tests.support.postgres import PostgresServer
from tests.support.server import ServerProcess, start_server


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(tmp_path_factory.mktemp("contextd-data"))
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def address(server: ServerProcess) -> str:
    return server.address


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL for the whole run, started by the first test that asks."""
    with postgres_for_tests() as server:
        yield server


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> Iterator[str]:
    """A fresh, migrated database of the test's own."""
    with fresh_database(postgres) as url:
        yield url

"""Shared fixtures: a real contextd server process on a free local port, and a throwaway
PostgreSQL (started only when a test asks for it)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.pg_databases import (
    BACKENDS,
    database_url_for,
    fresh_database,
    postgres_for_tests,
)
from tests.support.postgres import PostgresServer
from tests.support.server import ServerProcess, start_server

# The servers tests start (and the settings they read from the environment) search
# memories by terms alone: the local model is the server's default, and its load (seconds
# of CPU, about 100 MB) belongs only to the tests about search by meaning, which ask for
# it (`--embedding-provider local`, or tests.support.settings for servers in this process).
os.environ["CONTEXTD_EMBEDDING_PROVIDER"] = "none"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "both_backends: run the module's servers on SQLite and on PostgreSQL"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "both_backends"
    ):
        metafunc.parametrize("backend", BACKENDS, indirect=True, scope="session")


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    """The database of the servers a test starts: SQLite, unless the test is marked
    ``both_backends`` (then it runs on each)."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture(scope="session")
def server(
    tmp_path_factory: pytest.TempPathFactory, backend: str, request: pytest.FixtureRequest
) -> Iterator[ServerProcess]:
    proc = start_server(
        tmp_path_factory.mktemp("contextd-data"),
        database_url=database_url_for(request, backend),
    )
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

"""Shared fixtures: a real contextd server process on a free local port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.server import ServerProcess, start_server


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(tmp_path_factory.mktemp("contextd-data"))
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def address(server: ServerProcess) -> str:
    return server.address

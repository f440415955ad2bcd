"""Fixtures of the web-port tests: one server with the web port on, per module."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import aiohttp
import grpc
import grpc.aio
import pytest

from tests.support.grpc_web import (
    web_address,
)
from tests.support.server import ServerProcess, start_server
from tests.support.web_port import (
    ALLOWED,
    ALLOWED_LOCAL,
    MAX_MESSAGE,
)


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(
        tmp_path_factory.mktemp("grpc-web"),
        *("--web-port", "0", "--max-message-bytes", str(MAX_MESSAGE)),
        env={"CONTEXTD_CORS_ORIGINS": f"{ALLOWED}, {ALLOWED_LOCAL}/"},
    )
    yield proc
    assert proc.stop() == 0
    assert not [e for e in proc.log_lines if e.get("level") == "ERROR"]


@pytest.fixture(scope="module")
def web(web_server: ServerProcess) -> str:
    return web_address(web_server)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def native(web_server: ServerProcess) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(web_server.address) as channel:
        yield channel

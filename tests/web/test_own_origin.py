"""A page the web port serves itself (the context inspector) calls its own origin without
a --cors-origins entry, when the port is addressed by an IP address or localhost; under
any other name its origin must be listed (a name can be rebound to the address)."""

from __future__ import annotations

from collections.abc import Iterator

import aiohttp
import pytest
from contextd.fronts.web.cors import is_own_origin

from tests.support.grpc_web import web_address
from tests.support.server import ServerProcess, start_server

LIST_TOKENIZERS = "/contextd.v1.ContextService/ListTokenizers"


@pytest.mark.parametrize(
    ("origin", "scheme", "host", "own"),
    [
        ("http://127.0.0.1:8080", "http", "127.0.0.1:8080", True),
        ("http://localhost:8080", "http", "localhost:8080", True),
        ("https://[::1]:8443", "https", "[::1]:8443", True),
        ("http://192.168.1.20:50152", "http", "192.168.1.20:50152", True),
        # Another port, scheme or host: another origin.
        ("http://127.0.0.1:8081", "http", "127.0.0.1:8080", False),
        ("http://127.0.0.1:8080", "https", "127.0.0.1:8080", False),
        # A name its owner could point at this address.
        ("http://evil.test:8080", "http", "evil.test:8080", False),
        ("null", "http", "null", False),
    ],
)
def test_own_origin(origin: str, scheme: str, host: str, own: bool) -> None:
    assert is_own_origin(origin, scheme, host) is own


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_server(tmp_path_factory.mktemp("own-origin"), "--web-port", "0")
    yield server
    assert server.stop() == 0


async def _call(proc: ServerProcess, origin: str, host: str) -> int:
    address = web_address(proc)
    headers = {"Content-Type": "application/json", "Origin": origin, "Host": host}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://{address}{LIST_TOKENIZERS}", data=b"{}", headers=headers) as r,
    ):
        return r.status


async def test_a_call_from_the_ports_own_page_is_served(proc: ServerProcess) -> None:
    address = web_address(proc)
    assert await _call(proc, f"http://{address}", address) == 200


async def test_a_rebound_name_is_refused(proc: ServerProcess) -> None:
    port = web_address(proc).rsplit(":", 1)[1]
    assert await _call(proc, f"http://evil.test:{port}", f"evil.test:{port}") == 403

"""The web port's extras for browsers: the private-network preflight and trace context
headers; against a real server that requires an API key (the preflight needs none)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import aiohttp
import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.web.metadata import from_headers
from multidict import CIMultiDict, CIMultiDictProxy

from tests.support.auth import create_key
from tests.support.grpc_web import call, method_url, web_address
from tests.support.server import ServerProcess, start_server
from tests.support.web_port import ALLOWED, CHAT, CTX

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
OTHER_ORIGIN = "https://evil.example.com"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    data_dir = tmp_path_factory.mktemp("web-extras")
    token = create_key(data_dir, "alice")
    proc = start_server(data_dir, "--auth", "api-key", "--web-port", "0", "--cors-origins", ALLOWED)
    yield proc, token
    assert proc.stop() == 0
    assert not [e for e in proc.log_lines if e.get("level") == "ERROR"]


@pytest.fixture(scope="module")
def web(keyed: tuple[ServerProcess, str]) -> str:
    return web_address(keyed[0])


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def preflight(origin: str, **extra: str) -> dict[str, str]:
    return {"Origin": origin, "Access-Control-Request-Method": "POST", **extra}


# -- the private-network preflight ------------------------------------------------------


async def test_an_allowed_origin_may_reach_the_private_network(
    http: aiohttp.ClientSession, web: str
) -> None:
    asks = preflight(ALLOWED, **{"Access-Control-Request-Private-Network": "true"})
    async with http.options(method_url(web, CHAT), headers=asks) as r:
        assert r.status == 204
        assert r.headers["Access-Control-Allow-Origin"] == ALLOWED
        assert r.headers["Access-Control-Allow-Private-Network"] == "true"
        assert "Access-Control-Request-Private-Network" in r.headers["Vary"]
    # Only when asked.
    async with http.options(method_url(web, CHAT), headers=preflight(ALLOWED)) as r:
        assert r.status == 204
        assert "Access-Control-Allow-Private-Network" not in r.headers


async def test_another_origin_asking_for_the_private_network_is_refused(
    http: aiohttp.ClientSession, web: str
) -> None:
    asks = preflight(OTHER_ORIGIN, **{"Access-Control-Request-Private-Network": "true"})
    async with http.options(method_url(web, CHAT), headers=asks) as r:
        assert r.status == 403
        assert not [name for name in r.headers if name.lower().startswith("access-control-")]


# -- trace context ----------------------------------------------------------------------


async def test_trace_context_headers_are_allowed(
    http: aiohttp.ClientSession, web: str, keyed: tuple[ServerProcess, str]
) -> None:
    asks = preflight(ALLOWED, **{"Access-Control-Request-Headers": "content-type,traceparent"})
    async with http.options(method_url(web, CHAT), headers=asks) as r:
        allowed = {h.strip() for h in r.headers["Access-Control-Allow-Headers"].split(",")}
        assert {"traceparent", "tracestate"} <= allowed
    headers = {
        "Origin": ALLOWED,
        "Authorization": f"Bearer {keyed[1]}",
        "traceparent": TRACEPARENT,
        "tracestate": "vendor=1",
    }
    request = pb.CountTokensRequest(texts=["a b"], tokenizer="estimate")
    reply = await call(http, web, f"{CTX}/CountTokens", request, headers=headers)
    assert reply.code == grpc.StatusCode.OK, reply.message


def test_trace_context_is_forwarded_as_call_metadata() -> None:
    headers = CIMultiDict(
        [("Content-Type", "application/json"), ("traceparent", TRACEPARENT), ("tracestate", "a=1")]
    )
    forwarded = dict(from_headers(CIMultiDictProxy(headers)))
    assert forwarded == {"traceparent": TRACEPARENT, "tracestate": "a=1"}

"""The web port's extras for browsers and load balancers: the private-network preflight,
trace context headers, and ``GET /healthz``; against a real server that requires an API
key (neither the preflight nor the health probe needs one)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import grpc
import pytest
from contextd.fronts.web.metadata import from_headers
from contextd.v1 import context_pb2 as pb
from grpc_health.v1 import health_pb2, health_pb2_grpc
from multidict import CIMultiDict, CIMultiDictProxy

from tests.support.auth import create_key
from tests.support.grpc_web import call, method_url, web_address
from tests.support.server import ServerProcess, start_server
from tests.support.web_port import ALLOWED, CHAT, CTX

NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
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


# -- GET /healthz -----------------------------------------------------------------------


async def test_healthz_while_serving(http: aiohttp.ClientSession, web: str) -> None:
    async with http.get(f"http://{web}/healthz") as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("application/json")
        assert await r.json() == {"status": "SERVING"}
        assert r.headers["Cache-Control"] == "no-store"
    async with http.head(f"http://{web}/healthz") as r:
        assert r.status == 200 and await r.read() == b""
    # No credential needed, and no CORS: a page of any origin gets no Access-Control-*.
    async with http.get(f"http://{web}/healthz", headers={"Origin": OTHER_ORIGIN}) as r:
        assert r.status == 200
        assert "Access-Control-Allow-Origin" not in r.headers


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"])
async def test_healthz_answers_only_get_and_head(
    http: aiohttp.ClientSession, web: str, method: str
) -> None:
    headers = preflight(ALLOWED) if method == "OPTIONS" else {}
    async with http.request(method, f"http://{web}/healthz", headers=headers) as r:
        assert r.status == 405
        assert r.headers["Allow"] == "GET, HEAD"


async def test_other_paths_answer_as_before(http: aiohttp.ClientSession, web: str) -> None:
    for path in ("/", "/healthz/", "/health", f"/{CTX}/CountTokens"):
        async with http.get(f"http://{web}{path}") as r:
            assert r.status == 405, path
    async with http.post(f"http://{web}/healthz/more/deeply", data=b"") as r:
        assert r.status == 404


def test_healthz_answers_503_while_draining(tmp_path: Path) -> None:
    proc = start_server(tmp_path, "--web-port", "0", "--drain-delay", "2", "--shutdown-grace", "4")
    web = web_address(proc)

    async def healthz() -> tuple[int, object]:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://{web}/healthz") as r,
        ):
            return r.status, await r.json()

    assert asyncio.run(healthz()) == (200, {"status": "SERVING"})
    proc.process.send_signal(signal.SIGTERM)
    with grpc.insecure_channel(proc.address) as channel:
        check = health_pb2_grpc.HealthStub(channel).Check
        deadline = time.monotonic() + 1.5  # well within the drain
        while check(health_pb2.HealthCheckRequest(), timeout=5).status != NOT_SERVING:
            assert time.monotonic() < deadline, "health never turned NOT_SERVING"
            time.sleep(0.05)
        # The same status the health service answers, while the drain lasts.
        assert asyncio.run(healthz()) == (503, {"status": "NOT_SERVING"})
    assert proc.process.wait(10) == 0

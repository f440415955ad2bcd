"""What the web port holds at once: connections over --web-max-connections are answered
503, a body slower than --web-body-timeout ends its call, and bodies together stay
within --web-max-buffered-bytes. Each refusal leaves the port serving."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator

import aiohttp
import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.grpc_web import web_address
from tests.support.server import ServerProcess, start_server

COUNT_TOKENS = "/contextd.v1.ContextService/CountTokens"
REQUEST = pb.CountTokensRequest(texts=["x" * 40], tokenizer="estimate").SerializeToString()


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_server(
        tmp_path_factory.mktemp("web-limits"),
        *("--web-port", "0", "--web-max-connections", "3", "--web-body-timeout", "1"),
        *("--web-max-buffered-bytes", "100000"),
    )
    yield server
    assert server.stop() == 0
    assert not [e for e in server.log_lines if e.get("level") == "ERROR"]


@pytest.fixture
async def connections(proc: ServerProcess) -> AsyncIterator[list[asyncio.StreamWriter]]:
    """Raw connections a test opens; all closed at its end, and the server seen to have
    let them go (a new connection served), so the next test starts under the cap."""
    opened: list[asyncio.StreamWriter] = []
    yield opened
    for writer in opened:
        writer.close()
    deadline = time.monotonic() + 10
    while not await served(proc):
        assert time.monotonic() < deadline, "the web port did not let the connections go"
        await asyncio.sleep(0.05)


async def served(proc: ServerProcess) -> bool:
    """Whether a new connection's call is answered (not refused over the cap, where the
    refusal may also reach the client as a reset)."""
    headers = {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"}
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"http://{web_address(proc)}{COUNT_TOKENS}", data=REQUEST, headers=headers
            ) as r,
        ):
            return r.status != 503
    except aiohttp.ClientError:
        return False


async def connect(
    proc: ServerProcess, opened: list[asyncio.StreamWriter]
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = web_address(proc).rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    opened.append(writer)
    return reader, writer


def head(length: int) -> bytes:
    """A Connect unary call's request line and headers, for a body of ``length`` bytes."""
    return (
        f"POST {COUNT_TOKENS} HTTP/1.1\r\nHost: test\r\nContent-Type: application/proto\r\n"
        f"Connect-Protocol-Version: 1\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


async def answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The status and body of one HTTP/1.1 response (sized or chunked)."""
    status_line = await asyncio.wait_for(reader.readline(), 10)
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    status = int(status_line.split()[1])
    if headers.get("transfer-encoding") != "chunked":
        return status, await reader.readexactly(int(headers.get("content-length", "0")))
    body = b""
    while size := int((await reader.readline()).strip(), 16):
        body += await reader.readexactly(size + 2)
        body = body[:-2]
    await reader.readline()
    return status, body


async def counts_tokens(proc: ServerProcess) -> None:
    headers = {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://{web_address(proc)}{COUNT_TOKENS}", data=REQUEST, headers=headers) as r,
    ):
        assert r.status == 200, await r.text()
        assert pb.CountTokensResponse.FromString(await r.read()).text_tokens == [10]


async def test_connections_over_the_cap_are_answered_503(
    proc: ServerProcess, connections: list[asyncio.StreamWriter]
) -> None:
    held = [await connect(proc, connections) for _ in range(3)]
    await asyncio.sleep(0.2)  # the server has registered them
    reader, _ = await connect(proc, connections)
    status, body = await answer(reader)
    assert status == 503
    assert body == b"too many connections; retry shortly\n"
    assert await reader.read() == b""  # and closed
    # One held connection closes; a new one is served again.
    held[0][1].close()
    await asyncio.sleep(0.2)
    await counts_tokens(proc)


async def test_a_slow_body_ends_its_call(
    proc: ServerProcess, connections: list[asyncio.StreamWriter]
) -> None:
    reader, writer = await connect(proc, connections)
    writer.write(head(len(REQUEST)) + REQUEST[:3])
    started = time.monotonic()
    status, body = await answer(reader)
    waited = time.monotonic() - started
    assert status == 504
    assert json.loads(body) == {
        "code": "deadline_exceeded",
        "message": "the request body did not arrive within 1 s",
    }
    assert 0.9 < waited < 5
    writer.close()
    await counts_tokens(proc)


async def test_bodies_together_stay_within_the_budget(
    proc: ServerProcess, connections: list[asyncio.StreamWriter]
) -> None:
    # One call holds 70,000 of the 100,000 bytes, its body not yet whole.
    slow_reader, slow = await connect(proc, connections)
    slow.write(head(90_000) + b"\n" * 70_000)
    await asyncio.sleep(0.3)
    reader, writer = await connect(proc, connections)
    writer.write(head(40_000) + b"\n" * 40_000)
    status, body = await answer(reader)
    assert status == 429
    assert json.loads(body) == {
        "code": "resource_exhausted",
        "message": "the web port holds too many request bytes; retry shortly",
    }
    # The held body times out and gives its bytes back; a call fits again.
    assert (await answer(slow_reader))[0] == 504
    writer.close()
    slow.close()
    await counts_tokens(proc)


def test_health_answers_while_the_web_port_is_full(proc: ServerProcess) -> None:
    with grpc.insecure_channel(proc.address) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert reply.status == health_pb2.HealthCheckResponse.SERVING

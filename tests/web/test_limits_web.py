"""``--rate-limit`` on the web port: its calls count per credential like native ones (not
all as the one web port), and with ``--auth none`` per browser address."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb
from contextd.v1 import sessions_pb2_grpc
from google.protobuf.message import Message

from tests.support.auth import bearer, create_key
from tests.support.grpc_web import Reply, call, web_address
from tests.support.server import ServerProcess, start_server
from tests.support.status import retry_delay
from tests.support.web_port import CTX

RATE = ("--rate-limit", "1", "--rate-limit-burst", "3")
LIST_SESSIONS = "contextd.v1.SessionService/ListSessions"


async def exhaust(
    http: aiohttp.ClientSession,
    address: str,
    method: str,
    request: Message,
    headers: dict[str, str] | None = None,
) -> Reply:
    """Web calls until one is refused (the first three must pass); the refusal."""
    for passed in range(10):
        reply = await call(http, address, method, request, headers=headers)
        if reply.code != grpc.StatusCode.OK:
            assert passed >= 3, f"refused after {passed} calls, the burst is 3"
            assert reply.code == grpc.StatusCode.RESOURCE_EXHAUSTED, reply.message
            return reply
    raise AssertionError("never refused")


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str, str]]:
    data_dir = tmp_path_factory.mktemp("web-limits")
    alice, bob = create_key(data_dir, "alice"), create_key(data_dir, "bob")
    proc = start_server(data_dir, "--auth", "api-key", "--web-port", "0", *RATE)
    try:
        yield proc, alice, bob
    finally:
        assert proc.stop() == 0


async def test_web_calls_count_per_credential(keyed: tuple[ServerProcess, str, str]) -> None:
    proc, alice, bob = keyed
    address = web_address(proc)
    as_alice = {"Authorization": f"Bearer {alice}"}
    async with aiohttp.ClientSession() as http:
        refused = await exhaust(http, address, LIST_SESSIONS, spb.ListSessionsRequest(), as_alice)
        delay = retry_delay(refused.status())
        assert 0 < delay <= 1.0
        assert "rate limit" in refused.message
        # Bob's calls through the same web port have their own bucket.
        as_bob = {"Authorization": f"Bearer {bob}"}
        reply = await call(http, address, LIST_SESSIONS, spb.ListSessionsRequest(), headers=as_bob)
        assert reply.code == grpc.StatusCode.OK
        # Alice's bucket is the same on the native port.
        with grpc.insecure_channel(proc.address) as channel:
            sessions = sessions_pb2_grpc.SessionServiceStub(channel)
            with pytest.raises(grpc.RpcError) as error:
                sessions.ListSessions(spb.ListSessionsRequest(), metadata=bearer(alice))
            assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        await asyncio.sleep(delay + 0.3)
        reply = await call(
            http, address, LIST_SESSIONS, spb.ListSessionsRequest(), headers=as_alice
        )
        assert reply.code == grpc.StatusCode.OK


async def test_auth_none_counts_web_calls_per_browser_address(tmp_path: Path) -> None:
    proc = start_server(tmp_path, "--web-port", "0", *RATE)
    try:
        address = web_address(proc)
        tokenizers = f"{CTX}/ListTokenizers"
        async with aiohttp.ClientSession() as first:
            # A header of the same name from the browser is replaced, not believed.
            spoof = {"contextd-web-peer": "guess 10.0.0.9"}
            await exhaust(first, address, tokenizers, pb.ListTokenizersRequest(), spoof)
        # Another address (the whole of 127.0.0.0/8 is loopback) has its own bucket.
        other = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
        async with aiohttp.ClientSession(connector=other) as second:
            reply = await call(second, address, tokenizers, pb.ListTokenizersRequest())
            assert reply.code == grpc.StatusCode.OK
    finally:
        assert proc.stop() == 0

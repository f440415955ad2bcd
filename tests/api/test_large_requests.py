"""The largest allowed requests do not hold the server: while several 15 MB texts are
counted and built, a health check still answers within 100 ms.

Checks sent while the requests are still arriving are left out of that bound: grpc
copies each received message into Python bytes on the event loop's thread, tens of
milliseconds per 15 MB, before any of contextd's code sees it (docs/tokenizers.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import grpc.aio
import pytest
from contextd.v1 import context_pb2 as pb
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.server import ServerProcess, start_server

BIG = 15 * 1024 * 1024
SERVICE = pb.DESCRIPTOR.services_by_name["ContextService"].full_name
ARRIVAL_S = 0.3  # the six requests' bytes are in by then, with room to spare
OPTIONS = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_server(tmp_path_factory.mktemp("large"))
    yield server
    assert server.stop() == 0


async def test_health_answers_while_large_requests_run(proc: ServerProcess) -> None:
    text = "The quick brown fox jumps over the lazy dog. 敏捷的狐狸。\n" * (BIG // 70)
    # Serialized here, before anything is timed: the client's own loop must not be the
    # one that stalls.
    count = pb.CountTokensRequest(texts=[text], tokenizer="cl100k_base").SerializeToString()
    build = pb.BuildMessagesRequest(
        history=[pb.Message(role=pb.ROLE_USER, content=text)],
        user_message="and now?",
        token_budget=1000,
        tokenizer="cl100k_base",
    ).SerializeToString()
    # Health on a connection of its own, as a load balancer checks.
    async with (
        grpc.aio.insecure_channel(proc.address, options=OPTIONS) as channel,
        grpc.aio.insecure_channel(proc.address) as health_channel,
    ):
        count_tokens = channel.unary_unary(f"/{SERVICE}/CountTokens", _raw, _raw)
        build_messages = channel.unary_unary(f"/{SERVICE}/BuildMessages", _raw, _raw)
        health = health_pb2_grpc.HealthStub(health_channel)
        await health.Check(health_pb2.HealthCheckRequest())  # the channel is up
        large = asyncio.gather(
            *[count_tokens(count, timeout=120) for _ in range(4)],
            *[build_messages(build, timeout=120) for _ in range(2)],
        )
        sent = time.perf_counter()
        latencies: list[float] = []
        while not large.done():
            started = time.perf_counter()
            reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=10)
            if started - sent > ARRIVAL_S:
                latencies.append(time.perf_counter() - started)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            await asyncio.sleep(0.05)
        replies = await large
        took = time.perf_counter() - sent
    totals = {pb.CountTokensResponse.FromString(r).total_tokens for r in replies[:4]}
    assert len(totals) == 1 and totals.pop() > BIG // 10
    # The one history message is over the budget: dropped, the user message kept.
    built = pb.BuildMessagesResponse.FromString(replies[4])
    assert [m.content for m in built.messages] == ["and now?"]
    assert len(latencies) >= 5, "the large requests ended before they could be observed"
    # Measured against the large requests' own time, not the clock: a loop the work
    # blocked answers no check until a request is done (a stall as long as the work),
    # while a check that meets a step of the work holding the GIL waits a small share of
    # it, however loaded the machine (which slows both alike).
    ordered = sorted(latencies)
    shown = [round(x, 3) for x in latencies]
    assert ordered[len(ordered) // 2] < took / 20, (took, shown)
    assert ordered[-1] < took / 4, (took, shown)


def _raw(data: bytes) -> bytes:
    return data

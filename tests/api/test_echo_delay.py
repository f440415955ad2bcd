"""`contextd serve --echo-delay-ms`: the echo provider's deltas come spread in time, a
cancel ends the turn at once with its partial answer stored, and bad values refuse to
start."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc.aio
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc

from tests.support.chat_live import (
    Live,
    check_interrupted,
    completed,
    deltas,
    new_user,
    openai_fake,
    request,
)
from tests.support.server import start_server

# The echo answer quotes the message: about 100 words, 30-odd deltas.
LONG = " ".join(f"w{k}" for k in range(90))


@asynccontextmanager
async def echo_live(data_dir: Path, delay_ms: int) -> AsyncIterator[Live]:
    proc = start_server(data_dir, "--echo-delay-ms", str(delay_ms))
    try:
        async with grpc.aio.insecure_channel(proc.address) as channel:
            yield Live(
                openai_fake(),  # unused: the echo provider calls no model
                proc,
                chat_pb2_grpc.ChatServiceStub(channel),
                sessions_pb2_grpc.SessionServiceStub(channel),
                memory_pb2_grpc.MemoryServiceStub(channel),
            )
    finally:
        assert proc.stop() == 0


async def test_deltas_come_spread_by_the_delay(tmp_path: Path) -> None:
    delay = 0.1
    async with echo_live(tmp_path, int(delay * 1000)) as live:
        arrivals: list[float] = []
        events: list[Any] = []
        async for event in live.chat.StreamChat(request(new_user(), "Hello there, echo")):
            events.append(event)
            if event.WhichOneof("event") == "text_delta":
                arrivals.append(time.monotonic())
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_OK
    assert "".join(d.text for d in deltas(events)) == done.final_text
    assert len(arrivals) >= 3
    # A lower bound only: a busy machine may stream slower, never faster.
    assert arrivals[-1] - arrivals[0] >= (len(arrivals) - 1) * delay * 0.8


async def test_a_cancel_mid_stream_ends_the_turn_at_once(tmp_path: Path) -> None:
    # Ten seconds between deltas: a turn that slept on would end long after the checks.
    async with echo_live(tmp_path, 10_000) as live:
        user = new_user()
        call = live.chat.StreamChat(request(user, LONG))
        got: list[Any] = []
        async for event in call:
            got.append(event)
            if event.WhichOneof("event") == "text_delta":
                cancelled_at = time.monotonic()
                call.cancel()
                break
        [first] = deltas(got)
        sid = got[0].turn_started.session_id
        await check_interrupted(live, user, sid, first.text, "cancelled")
        assert time.monotonic() - cancelled_at < 5


@pytest.mark.parametrize("value", ["-1", "60001", "soon"])
def test_a_delay_out_of_range_refuses_to_start(tmp_path: Path, value: str) -> None:
    with pytest.raises(RuntimeError, match="exited before listening") as error:
        start_server(tmp_path, "--echo-delay-ms", value)
    assert "--echo-delay-ms" in str(error.value)

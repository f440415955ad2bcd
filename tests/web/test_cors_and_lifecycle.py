"""The web port: CORS, its life beside the native port, cancelled and late streams."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import grpc.aio
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

from tests.support.chat_live import ChatFake, eventually, openai_fake
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.fakes.llm_server import StreamReply, sse
from tests.support.grpc_web import (
    Reply,
    call,
    frame,
    method_url,
    parse_body,
    request_headers,
    unary,
    web_address,
)
from tests.support.server import ServerProcess, start_server
from tests.support.web_port import (
    ALLOWED,
    ALLOWED_LOCAL,
    CHAT,
    CTX,
    MEM,
    kinds,
    new_user,
)

# -- CORS -------------------------------------------------------------------------------


async def test_preflight_from_an_allowed_origin(http: aiohttp.ClientSession, web: str) -> None:
    for origin in (ALLOWED, ALLOWED_LOCAL):
        headers = {
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-grpc-web,x-user-agent,grpc-timeout,"
            "x-contextd-trace",
        }
        async with http.options(method_url(web, CHAT), headers=headers) as r:
            assert r.status == 204
            assert r.headers["Access-Control-Allow-Origin"] == origin
            assert "POST" in r.headers["Access-Control-Allow-Methods"]
            allowed = {h.strip() for h in r.headers["Access-Control-Allow-Headers"].split(",")}
            assert {
                "content-type",
                "x-grpc-web",
                "x-user-agent",
                "grpc-timeout",
                "connect-protocol-version",
                "connect-timeout-ms",
                "x-contextd-trace",
            } <= allowed
            assert "Origin" in r.headers["Vary"]


async def test_preflight_from_another_origin_is_refused(
    http: aiohttp.ClientSession, web: str
) -> None:
    for origin in ("https://evil.example.com", "http://localhost:3001", "null"):
        headers = {"Origin": origin, "Access-Control-Request-Method": "POST"}
        async with http.options(method_url(web, CHAT), headers=headers) as r:
            assert r.status == 403
            assert "Access-Control-Allow-Origin" not in r.headers


async def test_cross_origin_calls(http: aiohttp.ClientSession, web: str) -> None:
    request = pb.CountTokensRequest(texts=["a"], tokenizer="estimate")
    allowed = await call(http, web, f"{CTX}/CountTokens", request, headers={"Origin": ALLOWED})
    assert allowed.headers["Access-Control-Allow-Origin"] == ALLOWED
    exposed = {h.strip() for h in allowed.headers["Access-Control-Expose-Headers"].split(",")}
    assert exposed == {"grpc-status", "grpc-message", "grpc-status-details-bin"}

    # Another origin's call is not run at all, not only hidden from the page.
    user = new_user()
    headers = {**request_headers(), "Origin": "https://evil.example.com"}
    body = frame(mpb.AddMemoryRequest(user_id=user, content="planted").SerializeToString())
    async with http.post(method_url(web, f"{MEM}/AddMemory"), data=body, headers=headers) as r:
        assert r.status == 403 and "Access-Control-Allow-Origin" not in r.headers
    listed = await unary(
        http,
        web,
        f"{MEM}/ListMemories",
        mpb.ListMemoriesRequest(user_id=user),
        mpb.ListMemoriesResponse,
    )
    assert list(listed.memories) == []


# -- the native port beside it ---------------------------------------------------------


async def test_native_port_unchanged_with_the_web_port_on(native: grpc.aio.Channel) -> None:
    chat = chat_pb2_grpc.ChatServiceStub(native)
    request = cpb.StreamChatRequest(session=pb.SessionContext(user_id=new_user()), user_message="n")
    events = [e async for e in chat.StreamChat(request)]
    assert kinds(events)[0] == "turn_started"
    assert events[-1].turn_completed.status == cpb.TURN_STATUS_OK


def test_web_port_is_off_by_default(server: ServerProcess) -> None:
    assert server.logs("grpc-web listening") == []


def test_a_bad_cors_origin_stops_the_start(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="exited before listening") as error:
        start_server(tmp_path, "--web-port", "0", "--cors-origins", "localhost:3000")
    assert "is not an origin" in str(error.value)


def test_web_listener_stops_with_the_server(tmp_path: Path) -> None:
    proc = start_server(tmp_path, "--web-port", "0")
    host, port = web_address(proc).rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=2):
        pass
    assert proc.stop() == 0
    assert proc.logs("stopped")
    with pytest.raises(OSError), socket.create_connection((host, int(port)), timeout=2):
        pass


# -- cancellation and deadlines, with a slow model ---------------------------------------


@pytest.fixture(scope="module")
async def slow(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[ChatFake, ServerProcess]]:
    fake = openai_fake()
    async with fake:
        proc = start_server(
            tmp_path_factory.mktemp("grpc-web-slow"),
            *("--provider", "openai", "--provider-base-url", fake.url),
            *("--provider-model", "gpt-test", "--web-port", "0"),
            env={"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
        )
        try:
            yield fake, proc
        finally:
            assert await asyncio.to_thread(proc.stop) == 0


async def stored_turn(proc: ServerProcess, user: str, sid: str) -> list[Any] | None:
    async with grpc.aio.insecure_channel(proc.address) as channel:
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        page = await sessions.ListMessages(spb.ListMessagesRequest(user_id=user, session_id=sid))
    return list(page.messages) if len(page.messages) == 2 else None


async def first_events(response: aiohttp.ClientResponse, count: int) -> list[Any]:
    """The first ``count`` events of a streaming response, read frame by frame."""
    events = []
    for _ in range(count):
        prefix = await response.content.readexactly(5)
        assert prefix[0] == 0, "a trailer came before the events"
        payload = await response.content.readexactly(int.from_bytes(prefix[1:], "big"))
        events.append(cpb.StreamChatResponse.FromString(payload))
    return events


async def test_closing_the_response_mid_stream_cancels_the_turn(
    slow: tuple[ChatFake, ServerProcess], http: aiohttp.ClientSession
) -> None:
    fake, proc = slow
    seen = len(fake.disconnects)
    fake.script(
        StreamReply(oa.text_frames(["First part.", " more", " and", " more"]), frame_delay=0.5)
    )
    user = new_user()
    request = cpb.StreamChatRequest(session=pb.SessionContext(user_id=user), user_message="story")
    url = method_url(web_address(proc), CHAT)
    response = await http.post(
        url, data=frame(request.SerializeToString()), headers=request_headers()
    )
    started, delta = await first_events(response, 2)
    assert delta.text_delta.text == "First part."
    response.close()  # the browser went away

    sid = started.turn_started.session_id
    messages = await eventually(lambda: stored_turn(proc, user, sid), within=5)
    assert messages, "the partial answer was not stored"
    assert [(m.message.role, m.status) for m in messages] == [
        (pb.ROLE_USER, ""),
        (pb.ROLE_ASSISTANT, "cancelled"),
    ]
    assert messages[1].message.content == "First part."
    assert len(fake.disconnects) == seen + 1  # the model call was closed too

    async def logged() -> list[dict[str, object]]:
        return [e for e in proc.logs("rpc") if e["method"] == f"/{CHAT}"]

    assert (await eventually(logged))[-1]["code"] == "CANCELLED"


async def test_grpc_timeout_is_the_call_deadline(
    slow: tuple[ChatFake, ServerProcess], http: aiohttp.ClientSession
) -> None:
    fake, proc = slow
    frames = oa.text_frames(["Partial"])
    fake.script(StreamReply([*frames[:2], sse(oa.chunk({"content": " late"}), delay=30)]))
    user = new_user()
    request = cpb.StreamChatRequest(session=pb.SessionContext(user_id=user), user_message="hurry")
    web = web_address(proc)
    reply: Reply = await call(http, web, CHAT, request, headers={"grpc-timeout": "1500m"})
    assert reply.code == grpc.StatusCode.DEADLINE_EXCEEDED
    events = reply.decode(cpb.StreamChatResponse)
    assert kinds(events) == ["turn_started", "text_delta"]
    assert events[1].text_delta.text == "Partial"
    sid = events[0].turn_started.session_id
    messages = await eventually(lambda: stored_turn(proc, user, sid), within=5)
    assert messages and messages[1].status == "cancelled"
    assert messages[1].message.content == "Partial"


async def test_a_web_stream_in_flight_finishes_on_shutdown(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    fake = openai_fake()
    async with fake:
        proc = start_server(
            tmp_path,
            *("--provider", "openai", "--provider-base-url", fake.url, "--web-port", "0"),
            *("--shutdown-grace", "10"),
            env={"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
        )
        fake.script(StreamReply(oa.text_frames(["One.", " Two.", " Three."]), frame_delay=0.3))
        request = cpb.StreamChatRequest(
            session=pb.SessionContext(user_id=new_user()), user_message="s"
        )
        url = method_url(web_address(proc), CHAT)
        body = frame(request.SerializeToString())
        async with http.post(url, data=body, headers=request_headers()) as response:
            await first_events(response, 1)
            stopping = asyncio.create_task(asyncio.to_thread(proc.stop))
            rest, trailers = parse_body(await response.content.read(), text=False)
        assert await stopping == 0
    assert trailers["grpc-status"] == "0"
    done = cpb.StreamChatResponse.FromString(rest[-1]).turn_completed
    assert done.status == cpb.TURN_STATUS_OK and done.final_text == "One. Two. Three."


async def test_a_zero_grpc_timeout_is_already_late(http: aiohttp.ClientSession, web: str) -> None:
    request = pb.CountTokensRequest(texts=["a"], tokenizer="estimate")
    reply = await call(http, web, f"{CTX}/CountTokens", request, headers={"grpc-timeout": "0m"})
    assert reply.code == grpc.StatusCode.DEADLINE_EXCEEDED and reply.messages == []

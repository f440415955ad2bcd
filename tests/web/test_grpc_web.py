"""gRPC-Web on a real server: every service through the web port, with the same results,
errors, streaming, cancellation, deadlines and limits as the native port; CORS."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import grpc.aio
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, context_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import prompts_pb2 as ppb
from contextd.v1 import sessions_pb2 as spb
from grpc_health.v1 import health_pb2
from grpc_status import rpc_status

from tests.support.chat_live import ChatFake, eventually, openai_fake
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.fakes.llm_server import StreamReply, sse
from tests.support.grpc_web import (
    BINARY,
    TEXT,
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

ALLOWED = "https://addin.example.com"
ALLOWED_LOCAL = "http://localhost:3000"
MAX_MESSAGE = 1024 * 1024

CTX = "contextd.v1.ContextService"
SES = "contextd.v1.SessionService"
MEM = "contextd.v1.MemoryService"
PRM = "contextd.v1.PromptService"
CHAT = "contextd.v1.ChatService/StreamChat"


def new_user() -> str:
    return f"web-{uuid.uuid4().hex[:8]}"


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


async def chat_turn(
    http: aiohttp.ClientSession, web: str, user: str, text: str, session_id: str = ""
) -> list[cpb.StreamChatResponse]:
    request = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=session_id), user_message=text
    )
    reply = await call(http, web, CHAT, request)
    assert reply.code == grpc.StatusCode.OK, reply.message
    return reply.decode(cpb.StreamChatResponse)


def kinds(events: list[cpb.StreamChatResponse]) -> list[str]:
    return [str(e.WhichOneof("event")) for e in events]


# -- every service, unary -------------------------------------------------------------


async def test_context_service_answers_as_the_native_port_does(
    http: aiohttp.ClientSession, web: str, native: grpc.aio.Channel
) -> None:
    stub = context_pb2_grpc.ContextServiceStub(native)
    assemble = pb.AssemblePromptRequest(
        layers=pb.PromptLayers(identity="You are helpful.", mode="Mode: ask"), tokenizer="estimate"
    )
    build = pb.BuildMessagesRequest(
        system_prompts=["S"],
        history=[
            pb.Message(role=pb.ROLE_USER, content="AAAA"),
            pb.Message(role=pb.ROLE_ASSISTANT, content="BBBB"),
        ],
        user_message="E",
        token_budget=3,
        tokenizer="estimate",
        output_format=pb.OUTPUT_FORMAT_OPENAI,
    )
    count = pb.CountTokensRequest(texts=["hello world", "你好"], tokenizer="cl100k_base")

    got = await unary(http, web, f"{CTX}/AssemblePrompt", assemble, pb.AssemblePromptResponse)
    assert got.system_prompt == "You are helpful.\n\nMode: ask"
    assert got == await stub.AssemblePrompt(assemble)

    built = await unary(http, web, f"{CTX}/BuildMessages", build, pb.BuildMessagesResponse)
    assert [m.content for m in built.messages] == ["S", "BBBB", "E"]
    assert json.loads(built.payload_json)["messages"][0] == {"role": "system", "content": "S"}
    assert built == await stub.BuildMessages(build)

    counted = await unary(http, web, f"{CTX}/CountTokens", count, pb.CountTokensResponse)
    assert counted.text_tokens[0] == 2 and counted.total_tokens == sum(counted.text_tokens)
    assert counted == await stub.CountTokens(count)


async def test_sessions_create_append_list(http: aiohttp.ClientSession, web: str) -> None:
    user = new_user()
    created = await unary(
        http,
        web,
        f"{SES}/CreateSession",
        spb.CreateSessionRequest(user_id=user, title="从网页来", metadata={"app": "word"}),
        spb.CreateSessionResponse,
    )
    sid = created.session.id
    assert sid and created.session.title == "从网页来"
    appended = await unary(
        http,
        web,
        f"{SES}/AppendMessages",
        spb.AppendMessagesRequest(
            user_id=user,
            session_id=sid,
            messages=[
                pb.Message(role=pb.ROLE_USER, content="question"),
                pb.Message(role=pb.ROLE_ASSISTANT, content="answer"),
            ],
        ),
        spb.AppendMessagesResponse,
    )
    assert len(appended.messages) == 2
    listed = await unary(
        http,
        web,
        f"{SES}/ListMessages",
        spb.ListMessagesRequest(user_id=user, session_id=sid),
        spb.ListMessagesResponse,
    )
    assert [m.message.content for m in listed.messages] == ["question", "answer"]
    sessions = await unary(
        http,
        web,
        f"{SES}/ListSessions",
        spb.ListSessionsRequest(user_id=user),
        spb.ListSessionsResponse,
    )
    assert [s.id for s in sessions.sessions] == [sid]


async def test_memory_add_and_search(http: aiohttp.ClientSession, web: str) -> None:
    user = new_user()
    added = await unary(
        http,
        web,
        f"{MEM}/AddMemory",
        mpb.AddMemoryRequest(user_id=user, content="用户喜欢喝咖啡"),
        mpb.AddMemoryResponse,
    )
    assert added.created
    found = await unary(
        http,
        web,
        f"{MEM}/SearchMemories",
        mpb.SearchMemoriesRequest(user_id=user, query="咖啡"),
        mpb.SearchMemoriesResponse,
    )
    assert [r.memory.id for r in found.results] == [added.memory.id]


async def test_prompt_template_upsert_and_list(http: aiohttp.ClientSession, web: str) -> None:
    scenario = f"web-{uuid.uuid4().hex[:6]}"
    upserted = await unary(
        http,
        web,
        f"{PRM}/UpsertTemplate",
        ppb.UpsertTemplateRequest(scenario=scenario, system_prompt="Write for {{audience}}."),
        ppb.UpsertTemplateResponse,
    )
    assert upserted.template.version == 1
    listed = await unary(
        http, web, f"{PRM}/ListTemplates", ppb.ListTemplatesRequest(), ppb.ListTemplatesResponse
    )
    assert [t.system_prompt for t in listed.templates if t.scenario == scenario] == [
        "Write for {{audience}}."
    ]


async def test_collect_a_streamed_answer(http: aiohttp.ClientSession, web: str) -> None:
    user = new_user()
    events = await chat_turn(http, web, user, "remember this answer")
    answer_id = events[-1].turn_completed.assistant_message_id
    collected = await unary(
        http,
        web,
        f"{CTX}/Collect",
        pb.CollectRequest(user_id=user, message_id=answer_id, remember=True),
        pb.CollectResponse,
    )
    assert collected.message_id == answer_id and collected.is_collected


# -- server streaming -------------------------------------------------------------------


async def test_stream_chat_streams_every_event_in_order(
    http: aiohttp.ClientSession, web: str, native: grpc.aio.Channel
) -> None:
    user = new_user()
    url = method_url(web, CHAT)
    request = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user), user_message="你好，从 Office 来"
    )
    arrivals: list[bytes] = []
    async with http.post(
        url, data=frame(request.SerializeToString()), headers=request_headers()
    ) as r:
        assert r.status == 200 and r.headers["Content-Type"] == BINARY
        async for chunk in r.content.iter_any():
            arrivals.append(chunk)
    messages, trailers = parse_body(b"".join(arrivals), text=False)
    assert trailers["grpc-status"] == "0"
    events = [cpb.StreamChatResponse.FromString(m) for m in messages]
    names = kinds(events)
    assert names[0] == "turn_started" and names[-2:] == ["usage", "turn_completed"]
    assert names.count("text_delta") >= 2 and set(names[1:-2]) == {"text_delta"}
    done = events[-1].turn_completed
    assert done.status == cpb.TURN_STATUS_OK
    assert "".join(e.text_delta.text for e in events[1:-2]) == done.final_text
    assert "你好，从 Office 来" in done.final_text
    # Streamed, not buffered: the events came in more than one piece.
    assert len(arrivals) > 1

    # Stored as a native turn would be.
    sessions = sessions_pb2_grpc.SessionServiceStub(native)
    sid = events[0].turn_started.session_id
    listed = await sessions.ListMessages(spb.ListMessagesRequest(user_id=user, session_id=sid))
    assert [(m.message.role, m.message.content) for m in listed.messages] == [
        (pb.ROLE_USER, "你好，从 Office 来"),
        (pb.ROLE_ASSISTANT, done.final_text),
    ]


async def test_export_events_streams_the_event_log(http: aiohttp.ClientSession, web: str) -> None:
    user = new_user()
    events = await chat_turn(http, web, user, "log me")
    sid = events[0].turn_started.session_id
    reply = await call(
        http, web, f"{SES}/ExportEvents", spb.ExportEventsRequest(user_id=user, session_id=sid)
    )
    assert reply.code == grpc.StatusCode.OK
    lines = [json.loads(e.json) for e in reply.decode(spb.ExportEventsResponse)]
    assert [e["type"] for e in lines] == [
        "session_start",
        "turn_start",
        "assistant",
        "final",
        "turn_end",
    ]
    assert {e["session_id"] for e in lines} == {sid}


async def test_text_mode_unary_and_streaming(http: aiohttp.ClientSession, web: str) -> None:
    count = pb.CountTokensRequest(texts=["hello world"], tokenizer="estimate")
    reply = await call(http, web, f"{CTX}/CountTokens", count, text=True)
    assert reply.headers["Content-Type"] == TEXT
    assert reply.one(pb.CountTokensResponse).text_tokens == [3]

    request = cpb.StreamChatRequest(session=pb.SessionContext(user_id=new_user()), user_message="t")
    streamed = await call(http, web, CHAT, request, text=True)
    assert streamed.code == grpc.StatusCode.OK
    assert kinds(streamed.decode(cpb.StreamChatResponse))[-1] == "turn_completed"

    # A body in separately padded base64 chunks, as some clients send it.
    body = frame(count.SerializeToString())
    chunked = base64.b64encode(body[:4]) + base64.b64encode(body[4:])
    async with http.post(
        method_url(web, f"{CTX}/CountTokens"), data=chunked, headers=request_headers(text=True)
    ) as r:
        messages, trailers = parse_body(await r.read(), text=True)
    assert trailers["grpc-status"] == "0"
    assert pb.CountTokensResponse.FromString(messages[0]).text_tokens == [3]


# -- errors, as the native port reports them -------------------------------------------


async def test_invalid_argument_carries_the_same_bad_request(
    http: aiohttp.ClientSession, web: str, native: grpc.aio.Channel
) -> None:
    bad = pb.BuildMessagesRequest(system_prompts=["S"], user_message="hi", token_budget=-5)
    reply = await call(http, web, f"{CTX}/BuildMessages", bad)
    assert reply.code == grpc.StatusCode.INVALID_ARGUMENT
    assert reply.messages == []
    assert reply.violations() == ["token_budget"]
    with pytest.raises(grpc.aio.AioRpcError) as native_error:
        await context_pb2_grpc.ContextServiceStub(native).BuildMessages(bad)
    assert native_error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reply.message == native_error.value.details()
    assert reply.status() == rpc_status.from_call(native_error.value)  # type: ignore[arg-type]


async def test_not_found_and_permission_denied(http: aiohttp.ClientSession, web: str) -> None:
    user = new_user()
    missing = await call(
        http, web, f"{SES}/GetSession", spb.GetSessionRequest(user_id=user, session_id="nope")
    )
    assert missing.code == grpc.StatusCode.NOT_FOUND and "nope" in missing.message

    created = await unary(
        http,
        web,
        f"{SES}/CreateSession",
        spb.CreateSessionRequest(user_id=user),
        spb.CreateSessionResponse,
    )
    other = await call(
        http,
        web,
        f"{SES}/GetSession",
        spb.GetSessionRequest(user_id=new_user(), session_id=created.session.id),
    )
    assert other.code == grpc.StatusCode.PERMISSION_DENIED


async def test_stream_errors_end_with_a_trailer(http: aiohttp.ClientSession, web: str) -> None:
    reply = await call(http, web, CHAT, cpb.StreamChatRequest(user_message="no session"))
    assert reply.code == grpc.StatusCode.INVALID_ARGUMENT and reply.messages == []
    assert "session.user_id" in reply.violations()


async def test_health_is_served_too(http: aiohttp.ClientSession, web: str) -> None:
    reply = await call(http, web, "grpc.health.v1.Health/Check", health_pb2.HealthCheckRequest())
    assert (
        reply.one(health_pb2.HealthCheckResponse).status == health_pb2.HealthCheckResponse.SERVING
    )


async def test_unknown_method_is_unimplemented(http: aiohttp.ClientSession, web: str) -> None:
    reply = await call(http, web, f"{CTX}/NoSuchMethod", b"")
    assert reply.code == grpc.StatusCode.UNIMPLEMENTED


async def test_each_call_is_logged_like_a_native_one(
    http: aiohttp.ClientSession, web: str, web_server: ServerProcess
) -> None:
    user = new_user()
    await call(http, web, f"{SES}/GetSession", spb.GetSessionRequest(user_id=user, session_id="x"))

    async def logged() -> list[dict[str, object]]:
        return [
            e
            for e in web_server.logs("rpc")
            if e["method"] == f"/{SES}/GetSession" and e["code"] == "NOT_FOUND"
        ]

    assert await eventually(logged)


async def test_unicode_error_message_survives(http: aiohttp.ClientSession, web: str) -> None:
    reply = await call(
        http, web, f"{SES}/GetSession", spb.GetSessionRequest(user_id="u", session_id="会话-1")
    )
    assert reply.code == grpc.StatusCode.NOT_FOUND and "会话-1" in reply.message
    assert reply.trailers["grpc-message"].isascii()


# -- limits and malformed requests ----------------------------------------------------


async def test_message_size_limit_as_natively(
    http: aiohttp.ClientSession, web: str, web_server: ServerProcess
) -> None:
    just_over = pb.CountTokensRequest(texts=["x" * MAX_MESSAGE], tokenizer="estimate")
    reply = await call(http, web, f"{CTX}/CountTokens", just_over)
    assert reply.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    big = grpc.aio.insecure_channel(
        web_server.address, options=[("grpc.max_send_message_length", -1)]
    )
    async with big:
        with pytest.raises(grpc.aio.AioRpcError) as native_error:
            await context_pb2_grpc.ContextServiceStub(big).CountTokens(just_over)
    assert native_error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert reply.message == native_error.value.details()

    # Far over: refused before it is read whole.
    huge = pb.CountTokensRequest(texts=["x" * (3 * MAX_MESSAGE)], tokenizer="estimate")
    refused = await call(http, web, f"{CTX}/CountTokens", huge)
    assert refused.code == grpc.StatusCode.RESOURCE_EXHAUSTED

    # Under the limit a large message goes through.
    fits = pb.CountTokensRequest(texts=["x" * (MAX_MESSAGE - 1024)], tokenizer="estimate")
    ok = await call(http, web, f"{CTX}/CountTokens", fits)
    assert ok.one(pb.CountTokensResponse).text_tokens == [(MAX_MESSAGE - 1024) // 4]


async def test_malformed_request_headers(http: aiohttp.ClientSession, web: str) -> None:
    """Bad headers and codecs; malformed frames: test_web_malformed_frames.py."""
    url = method_url(web, f"{CTX}/CountTokens")
    headers = request_headers(**{"grpc-timeout": "soon"})
    async with http.post(url, data=frame(b""), headers=headers) as r:
        _, trailers = parse_body(await r.read(), text=False)
    assert trailers["grpc-status"] == str(grpc.StatusCode.INVALID_ARGUMENT.value[0])

    bad_binary = request_headers(**{"x-trace-bin": "***"})
    async with http.post(url, data=frame(b""), headers=bad_binary) as r:
        _, trailers = parse_body(await r.read(), text=False)
    assert trailers["grpc-status"] == str(grpc.StatusCode.INVALID_ARGUMENT.value[0])

    json_headers = {**request_headers(), "Content-Type": "application/grpc-web+json"}
    async with http.post(url, data=b"{}", headers=json_headers) as r:
        assert r.status == 415


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

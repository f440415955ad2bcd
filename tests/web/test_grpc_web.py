"""gRPC-Web on a real server: every service through the web port, with the same results,
errors, streaming and limits as the native port (CORS, cancellation and deadlines are in
test_cors_and_lifecycle.py)."""

from __future__ import annotations

import base64
import json
import uuid

import aiohttp
import grpc
import grpc.aio
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import prompts_pb2 as ppb
from contextd.v1 import sessions_pb2 as spb
from grpc_health.v1 import health_pb2
from grpc_status import rpc_status

from tests.support.chat_live import eventually
from tests.support.grpc_web import (
    BINARY,
    TEXT,
    call,
    frame,
    method_url,
    parse_body,
    request_headers,
    unary,
)
from tests.support.server import ServerProcess
from tests.support.web_port import (
    CHAT,
    CTX,
    MAX_MESSAGE,
    MEM,
    PRM,
    SES,
    chat_turn,
    kinds,
    new_user,
)

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


async def test_not_found_also_for_another_users_session(
    http: aiohttp.ClientSession, web: str
) -> None:
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
    assert other.code == grpc.StatusCode.NOT_FOUND


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
    reply = await call(http, web, f"{CTX}/CountTokens", pb.CountTokensRequest(tokenizer="会话-1"))
    assert reply.code == grpc.StatusCode.INVALID_ARGUMENT and "会话-1" in reply.message
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

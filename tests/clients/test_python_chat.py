"""The Python SDK's chat turns and session helpers, sync and async.

Against the live server with the offline echo provider (``address``), and against
``FakeChatServer``, an in-process gRPC server whose turns are scripted by the user
message: what echo never sends (tool calls, error statuses, unknown enum numbers and
event kinds) and turns slow enough to cancel in the middle, with the server side
noticing the cancel. ``tests/test_cli_chat.py`` uses the fake server too.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import grpc
import pytest
from contextd_client import (
    TURN_STATUSES,
    AsyncChatStream,
    AsyncContextClient,
    ChatStream,
    ContextdError,
    InvalidResponseError,
    TextDelta,
    TokenUsage,
    ToolCallEvent,
    TurnCompleted,
    TurnStarted,
    Usage,
    cpb,
    pb,
)
from contextd_client import ContextClient as Client

from tests.support.fake_chat_server import (
    SLOW_DELTAS,
    FakeChatServer,
    closed_port,
    fake_chat_server,
)


def new_user() -> str:
    return f"u-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def fake() -> Iterator[FakeChatServer]:
    with fake_chat_server() as server:
        yield server


@pytest.fixture
def client(address: str) -> Iterator[Client]:
    with Client(address, timeout=20) as c:
        yield c


# Against the echo server ----------------------------------------------------------------


def test_a_turn_streams_typed_events(client: Client) -> None:
    user = new_user()
    stream = client.stream_chat("Hello, I am Ada", user_id=user, title="first")
    assert isinstance(stream, ChatStream)
    events = list(stream)
    started, done = events[0], events[-1]
    assert isinstance(started, TurnStarted) and isinstance(done, TurnCompleted)
    assert started.turn_index == 1 and started.provider == "echo" and started.user_message_id
    assert started.prompt_tokens_estimate == started.context.total_tokens > 0
    assert not started.prompt_tokens_warning
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 2 and {d.step for d in deltas} == {0}
    assert "".join(d.text for d in deltas) == done.final_text == stream.text
    assert "Hello, I am Ada" in done.final_text
    [usage] = [e for e in events if isinstance(e, Usage)]
    assert usage.usage.completion_tokens == len(done.final_text.split())
    assert done.status == "ok" and done.ok and done.error_message == ""
    assert done.assistant_message_id and done.pending_tool_calls == []
    assert done.turn_usage == done.session_usage == done.step_usage
    assert done.turn_usage.prompt_tokens_estimate == started.prompt_tokens_estimate
    assert stream.started == started and stream.completed == done
    assert stream.session_id == started.session_id and not stream.cancelled

    second = client.stream_chat("What is my name?", user_id=user, session_id=stream.session_id)
    completed = second.result()
    assert second.started is not None and second.started.turn_index == 2
    assert "4 messages" in completed.final_text  # system, the first turn, the new message
    assert completed.session_usage.completion_tokens == (
        done.turn_usage.completion_tokens + completed.turn_usage.completion_tokens
    )

    session = client.get_session(user, stream.session_id)
    assert session["title"] == "first" and session["message_count"] == 4
    messages = client.list_messages(user, stream.session_id)
    assert [(m["role"], m["turn_index"], m["seq"]) for m in messages] == [
        ("user", 1, 0),
        ("assistant", 1, 1),
        ("user", 2, 2),
        ("assistant", 2, 3),
    ]
    assert messages[0]["content"] == "Hello, I am Ada"
    assert messages[0]["id"] == started.user_message_id
    assert messages[1]["content"] == done.final_text and messages[1]["status"] == ""
    assert isinstance(messages[0]["create_time"], datetime)
    assert messages[0]["create_time"].tzinfo is not None
    # All pages are read.
    assert client.list_messages(user, stream.session_id, page_size=1) == messages

    events_log = list(client.export_events(user, stream.session_id))
    assert [e["type"] for e in events_log] == [
        "session_start",
        "turn_start",
        "assistant",
        "final",
        "turn_end",
        "turn_start",
        "assistant",
        "final",
        "turn_end",
    ]
    assert events_log[1]["content"] == "Hello, I am Ada"
    tail = list(client.export_events(user, stream.session_id, after=7))
    assert [e["type"] for e in tail] == ["final", "turn_end"]


def test_end_session_mode_and_the_xml_history(client: Client) -> None:
    user = new_user()
    stream = client.stream_chat("Tom & Jerry <3", user_id=user, mode="notebook")
    stream.result()
    assert client.end_session(user, stream.session_id, mode="notebook") is True
    assert client.end_session(user, stream.session_id) is False
    client.stream_chat("Again", user_id=user, session_id=stream.session_id).result()

    starts_and_ends = [
        (e["type"], e["meta"]["mode"])
        for e in client.export_events(user, stream.session_id)
        if e["type"] in ("session_start", "session_end")
    ]
    assert starts_and_ends == [
        ("session_start", "notebook"),
        ("session_end", "notebook"),
        ("session_start", "session"),
    ]
    xml = client.export_xml(user, stream.session_id)
    assert xml.startswith("<?xml") and "Tom &amp; Jerry &lt;3" in xml
    assert xml.count("<turn ") == 2

    with pytest.raises(ContextdError) as error:
        client.end_session("intruder", stream.session_id)
    assert error.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(ContextdError) as error:
        client.end_session(user, "no-such-session")
    assert error.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(ContextdError) as error:
        client.stream_chat("hi", user_id=user, mode="two\nlines").result()
    assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_create_session_then_chat_in_it(client: Client) -> None:
    user = new_user()
    session = client.create_session(user, title="planning", metadata={"project": "contextd"})
    assert session["user_id"] == user and session["title"] == "planning"
    assert session["metadata"] == {"project": "contextd"} and session["message_count"] == 0
    assert isinstance(session["create_time"], datetime)
    assert client.list_messages(user, session["id"]) == []
    done = client.stream_chat("Hi", user_id=user, session_id=session["id"]).result()
    assert done.ok
    assert len(client.list_messages(user, session["id"])) == 2


def test_request_options_reach_the_server(client: Client) -> None:
    """Tools, model options, variables and memory are accepted; echo ignores them."""
    stream = client.stream_chat(
        "Weather?",
        user_id=new_user(),
        tools=[
            {
                "name": "get_weather",
                "description": "Weather of a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
            {"type": "function", "function": {"name": "get_time", "parameters": "{}"}},
        ],
        variables={"lang": "en"},
        memory=False,
        model="echo-large",
        temperature=0.2,
        max_output_tokens=50,
        stop=["\n\n"],
        token_budget=4000,
        tokenizer="estimate",
    )
    done = stream.result()
    assert done.ok
    assert stream.started is not None and stream.started.model == "echo-large"
    assert stream.started.context.tokenizer == "estimate"


def test_prebuilt_messages_mode(client: Client) -> None:
    done = client.stream_chat(
        "And now?",
        user_id=new_user(),
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
        ],
    ).result()
    assert "4 messages" in done.final_text


def test_breaking_out_of_the_loop_cancels_the_call(client: Client) -> None:
    stream = client.stream_chat("Tell me a long story", user_id=new_user())
    call = stream.call
    for event in stream:
        assert isinstance(event, TurnStarted)
        break
    del stream, event  # what leaving `for event in client.stream_chat(...)` does
    assert call.code() == grpc.StatusCode.CANCELLED


def test_with_block_and_cancel(client: Client) -> None:
    user = new_user()
    with client.stream_chat("Hi", user_id=user) as stream:
        first = next(stream)
    assert isinstance(first, TurnStarted)
    assert stream.cancelled and stream.call.code() == grpc.StatusCode.CANCELLED
    assert list(stream) == []  # a cancelled stream just ends
    with pytest.raises(ContextdError) as error:
        stream.result()
    assert error.value.code == grpc.StatusCode.CANCELLED

    # The session goes on after a cancelled turn.
    done = client.stream_chat("Again", user_id=user, session_id=first.session_id).result()
    assert done.ok
    assert not stream.cancel()  # already cancelled: nothing to do

    finished = client.stream_chat("Hi", user_id=user)
    finished.result()
    assert not finished.cancel() and not finished.cancelled  # nothing left to cancel


@pytest.mark.parametrize(
    ("kwargs", "code", "fields"),
    [
        ({"user_id": ""}, grpc.StatusCode.INVALID_ARGUMENT, ["session.user_id"]),
        (
            {"tools": [{"name": "bad name"}]},
            grpc.StatusCode.INVALID_ARGUMENT,
            ["tools[0].name"],
        ),
        (
            {"tools": [{"name": "t", "parameters": "[1]"}]},
            grpc.StatusCode.INVALID_ARGUMENT,
            ["tools[0].parameters_json"],
        ),
        ({"session_id": "0" * 32}, grpc.StatusCode.NOT_FOUND, []),
        (
            {"token_budget": 5, "refuse_over_limit": True},
            grpc.StatusCode.FAILED_PRECONDITION,
            [],
        ),
    ],
)
def test_refused_turns_raise_contextd_error(
    client: Client, kwargs: dict[str, Any], code: grpc.StatusCode, fields: list[str]
) -> None:
    kwargs = {"user_id": new_user(), **kwargs}
    stream = client.stream_chat("hello " * 10, **kwargs)  # nothing is raised yet
    with pytest.raises(ContextdError) as error:
        next(stream)
    assert error.value.code == code and error.value.fields == fields
    assert isinstance(error.value.__cause__, grpc.RpcError)
    assert list(stream) == []


def test_another_users_session_is_unknown(client: Client) -> None:
    owner = new_user()
    started = client.stream_chat("mine", user_id=owner)
    started.result()
    session_id = started.session_id
    for call in (
        lambda: client.stream_chat("hi", user_id="intruder", session_id=session_id).result(),
        lambda: client.get_session("intruder", session_id),
        lambda: client.list_messages("intruder", session_id),
        lambda: list(client.export_events("intruder", session_id)),
    ):
        with pytest.raises(ContextdError) as error:
            call()
        assert error.value.code == grpc.StatusCode.NOT_FOUND


def test_arguments_that_cannot_be_encoded_raise_at_once(client: Client) -> None:
    with pytest.raises(TypeError, match="tools must be a sequence"):
        client.stream_chat("hi", user_id="u", tools={"name": "x"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="memory"):
        client.stream_chat("hi", user_id="u", memory="on")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tool_results\\[0\\] must be a mapping"):
        client.stream_chat("", user_id="u", tool_results=["x"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="parameters cannot be encoded"):
        client.stream_chat("hi", user_id="u", tools=[{"name": "t", "parameters": {"x": object()}}])
    with pytest.raises(TypeError, match="token_budget"):
        client.stream_chat("hi", user_id="u", token_budget="5")  # type: ignore[arg-type]


def test_connection_refused_is_unavailable() -> None:
    with Client(f"127.0.0.1:{closed_port()}", timeout=5) as c:
        with pytest.raises(ContextdError) as error:
            c.stream_chat("hi", user_id="u").result()
        assert error.value.code == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(ContextdError) as error:
            c.create_session("u")
        assert error.value.code == grpc.StatusCode.UNAVAILABLE


# Async, against the echo server -----------------------------------------------------------


async def test_async_turn_and_sessions(address: str) -> None:
    user = new_user()
    async with AsyncContextClient(address, timeout=20) as c:
        session = await c.create_session(user, host="excel")
        assert session["host"] == "excel"
        stream = c.stream_chat("Bonjour", user_id=user, session_id=session["id"])
        assert isinstance(stream, AsyncChatStream)
        events = [event async for event in stream]
        assert isinstance(events[0], TurnStarted) and isinstance(events[-1], TurnCompleted)
        assert events[0].session_id == session["id"] == stream.session_id
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        assert text == events[-1].final_text == stream.text and "Bonjour" in text
        assert events[-1].status == "ok"

        done = await c.stream_chat("Encore", user_id=user, session_id=session["id"]).result()
        assert "4 messages" in done.final_text
        assert (await c.get_session(user, session["id"]))["message_count"] == 4
        messages = await c.list_messages(user, session["id"], page_size=3)
        assert [m["role"] for m in messages] == ["user", "assistant"] * 2
        types = [e["type"] async for e in c.export_events(user, session["id"])]
        assert types[0] == "session_start" and types.count("turn_end") == 2
        assert await c.end_session(user, session["id"], mode="async") is True
        assert await c.end_session(user, session["id"]) is False
        xml = await c.export_xml(user, session["id"])
        assert xml.count("<turn ") == 2 and "<session_end" in xml


async def test_async_break_cancels_the_call(address: str) -> None:
    async with AsyncContextClient(address, timeout=20) as c:
        stream = c.stream_chat("Hi", user_id=new_user())
        call = stream.call
        async for event in stream:
            assert isinstance(event, TurnStarted)
            break
        del stream
        assert await call.code() == grpc.StatusCode.CANCELLED

        async with c.stream_chat("Hi", user_id=new_user()) as held:
            await held.__anext__()
        assert held.cancelled and await held.call.code() == grpc.StatusCode.CANCELLED
        assert [e async for e in held] == []
        with pytest.raises(ContextdError) as error:
            await held.result()
        assert error.value.code == grpc.StatusCode.CANCELLED


async def test_async_errors(address: str) -> None:
    async with AsyncContextClient(address, timeout=20) as c:
        with pytest.raises(ContextdError) as error:
            await c.stream_chat("hi", user_id="", tools=[{"name": "no way"}]).result()
        assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert error.value.fields == ["session.user_id", "tools[0].name"]
        with pytest.raises(ContextdError) as error:
            await c.get_session(new_user(), "0" * 32)
        assert error.value.code == grpc.StatusCode.NOT_FOUND
    async with AsyncContextClient(f"127.0.0.1:{closed_port()}", timeout=5) as c:
        with pytest.raises(ContextdError) as error:
            async for _ in c.stream_chat("hi", user_id="u"):
                pass
        assert error.value.code == grpc.StatusCode.UNAVAILABLE


# Against the fake server --------------------------------------------------------------------


def test_tool_calls_and_requires_action(fake: FakeChatServer) -> None:
    with Client(fake.address, timeout=10) as c:
        events = list(c.stream_chat("tool please", user_id="u", session_id="s1"))
        calls = [e for e in events if isinstance(e, ToolCallEvent)]
        assert calls == [ToolCallEvent("call_1", "get_weather", '{"city":"Paris"}', 0)]
        assert calls[0].parsed_arguments() == {"city": "Paris"}
        assert [e.usage for e in events if isinstance(e, Usage)] == [TokenUsage(10, 3, 0)]
        done = events[-1]
        assert isinstance(done, TurnCompleted) and done.status == "requires_action"
        assert not done.ok and done.pending_tool_calls == [calls[0].as_dict()]

        # The host runs the tool and sends the result back to continue the turn.
        results = [
            {"tool_call_id": call["id"], "content": "18 C"} for call in done.pending_tool_calls
        ]
        c.stream_chat("", user_id="u", session_id="s1", tool_results=results).result()
    sent = fake.requests[-1]
    assert sent.user_message == "" and sent.session.session_id == "s1"
    assert [(r.tool_call_id, r.content) for r in sent.tool_results] == [("call_1", "18 C")]


def test_error_and_unknown_statuses(fake: FakeChatServer) -> None:
    with Client(fake.address, timeout=10) as c:
        failed = c.stream_chat("fail now", user_id="u").result()
        assert failed.status == "error" and failed.error_message == "the provider went away"
        assert failed.final_text == "Half an"
        future = c.stream_chat("future", user_id="u")
        events = list(future)  # the unknown event kind is skipped
        assert [type(e).__name__ for e in events] == ["TurnStarted", "TextDelta", "TurnCompleted"]
        assert future.completed is not None and future.completed.status == "unknown(42)"
    assert set(TURN_STATUSES) == {"ok", "requires_action", "max_steps", "cancelled", "error"}


def test_the_request_as_sent(fake: FakeChatServer) -> None:
    with Client(fake.address, timeout=10) as c:
        c.stream_chat(
            "hi",
            user_id="ada",
            session_id="s9",
            scenario="excel-formula",
            host="excel",
            variables={"lang": "fr"},
            memory=True,
            tools=[{"name": "t", "description": "d", "parameters": {"type": "object"}}],
            token_budget=900,
            tokenizer="estimate",
            temperature=0,
            stop="END",
            refuse_over_limit=True,
            title="T",
        ).result()
        c.stream_chat("plain", user_id="ada").result()
    sent, plain = fake.requests
    assert sent.session.user_id == "ada" and sent.session.session_id == "s9"
    assert (sent.session.scenario, sent.session.host) == ("excel-formula", "excel")
    assert dict(sent.session.variables) == {"lang": "fr"}
    assert sent.session.memory == pb.MEMORY_MODE_ON
    assert sent.tools[0].name == "t" and sent.tools[0].description == "d"
    assert json.loads(sent.tools[0].parameters_json) == {"type": "object"}
    assert (sent.token_budget, sent.tokenizer, sent.title) == (900, "estimate", "T")
    assert sent.model.HasField("temperature") and sent.model.temperature == 0
    assert list(sent.model.stop) == ["END"] and sent.model.model == ""
    assert sent.prompt_limit_policy == cpb.PROMPT_LIMIT_POLICY_REFUSE
    # Nothing set: no model options, memory and policy left to the server.
    assert not plain.HasField("model") and plain.session.memory == pb.MEMORY_MODE_UNSPECIFIED
    assert plain.prompt_limit_policy == cpb.PROMPT_LIMIT_POLICY_UNSPECIFIED


def test_breaking_early_cancels_on_the_server(fake: FakeChatServer) -> None:
    with Client(fake.address, timeout=30) as c:
        for event in c.stream_chat("slow story", user_id="u"):
            if isinstance(event, TextDelta):
                break
    assert fake.cancelled.wait(5) and not fake.finished.is_set()


def test_deadline_mid_stream(fake: FakeChatServer) -> None:
    with Client(fake.address, timeout=30) as c:
        stream = c.stream_chat("slow story", user_id="u", timeout=0.3)
        with pytest.raises(ContextdError) as error:
            for _ in stream:
                pass
    assert error.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert stream.text.startswith("w0 ")  # what arrived before the deadline


def test_cancel_from_another_thread_ends_the_iteration(fake: FakeChatServer) -> None:
    with Client(fake.address, timeout=30) as c:
        stream = c.stream_chat("slow story", user_id="u")
        threading.Timer(0.3, stream.cancel).start()
        events = list(stream)
    assert stream.cancelled and 1 < len(events) < SLOW_DELTAS
    assert fake.cancelled.wait(5)


def test_export_events_rejects_a_line_that_is_not_an_object(fake: FakeChatServer) -> None:
    with Client(fake.address, timeout=10) as c:
        events = c.export_events("u", "s")
        assert next(events) == {"type": "session_start"}
        with pytest.raises(InvalidResponseError, match="not a JSON object"):
            next(events)


async def test_async_cancelling_the_task_cancels_the_call(fake: FakeChatServer) -> None:
    async with AsyncContextClient(fake.address, timeout=30) as c:
        stream = c.stream_chat("slow story", user_id="u")

        async def read_all() -> None:
            async for _ in stream:
                pass

        task = asyncio.create_task(read_all())
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert stream.cancelled
        assert await asyncio.to_thread(fake.cancelled.wait, 5)

        # cancel() from another task ends that task's iteration quietly.
        fake.cancelled.clear()
        other = c.stream_chat("slow story", user_id="u")
        asyncio.get_running_loop().call_later(0.3, other.cancel)
        events = [e async for e in other]
        assert other.cancelled and 1 < len(events) < SLOW_DELTAS
        assert await asyncio.to_thread(fake.cancelled.wait, 5)


async def test_async_tool_calls(fake: FakeChatServer) -> None:
    async with AsyncContextClient(fake.address, timeout=10) as c:
        done = await c.stream_chat("tool please", user_id="u").result()
    assert done.status == "requires_action"
    assert done.pending_tool_calls == [
        {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}
    ]

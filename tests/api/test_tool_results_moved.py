"""Tool results a user message separated from their calls, through the gRPC API:
BuildMessages inline and in session mode, and the context a StreamChat model is sent."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import sessions_pb2 as spb

from tests.support.chat_live import Live, completed, run_turn
from tests.support.fakes import anthropic_sse as an
from tests.support.fakes import openai_sse as oa

# Each test runs against a server on SQLite and one on PostgreSQL.
pytestmark = pytest.mark.both_backends


@pytest.fixture(scope="module")
def stubs(
    address: str,
) -> Iterator[tuple[context_pb2_grpc.ContextServiceStub, sessions_pb2_grpc.SessionServiceStub]]:
    with grpc.insecure_channel(address) as channel:
        yield (
            context_pb2_grpc.ContextServiceStub(channel),
            sessions_pb2_grpc.SessionServiceStub(channel),
        )


def user(text: str) -> pb.Message:
    return pb.Message(role=pb.ROLE_USER, content=text)


def calls(*ids: str, text: str = "") -> pb.Message:
    tool_calls = [pb.ToolCall(id=i, name="lookup", arguments="{}") for i in ids]
    return pb.Message(role=pb.ROLE_ASSISTANT, content=text, tool_calls=tool_calls)


def result(call_id: str) -> pb.Message:
    return pb.Message(role=pb.ROLE_TOOL, content=f"result of {call_id}", tool_call_id=call_id)


def moves(report: pb.BuildReport) -> list[tuple[str, int, int]]:
    return [(m.tool_call_id, m.from_index, m.call_index) for m in report.moved_tool_results]


def drops(report: pb.BuildReport) -> list[tuple[int, int, int]]:
    return [(d.start_index, d.count, d.reason) for d in report.dropped]


INTERRUPTED = [user("look both up"), calls("a", "b"), user("wait"), result("b"), result("a")]


def inline(
    context: context_pb2_grpc.ContextServiceStub,
    history: list[pb.Message],
    output_format: int = pb.OUTPUT_FORMAT_NEUTRAL,
) -> pb.BuildMessagesResponse:
    request = pb.BuildMessagesRequest(
        user_message="go on", token_budget=4000, history=history, output_format=output_format
    )
    return context.BuildMessages(request)  # type: ignore[no-any-return]


# --- BuildMessages, history in the request ---------------------------------------------------


def test_inline_results_move_back_behind_their_call(stubs: Any) -> None:
    reply = inline(stubs[0], INTERRUPTED)
    got = [(m.role, m.content, m.tool_call_id) for m in reply.messages]
    assert got == [
        (pb.ROLE_USER, "look both up", ""),
        (pb.ROLE_ASSISTANT, "", ""),
        (pb.ROLE_TOOL, "result of a", "a"),
        (pb.ROLE_TOOL, "result of b", "b"),
        (pb.ROLE_USER, "wait", ""),
        (pb.ROLE_USER, "go on", ""),
    ]
    assert moves(reply.report) == [("b", 3, 1), ("a", 4, 1)]
    assert drops(reply.report) == []
    assert list(reply.report.removed_tool_calls) == []
    assert reply.report.history_kept == 5


def test_inline_unpairable_results_are_still_dropped(stubs: Any) -> None:
    history = [
        user("q"),
        calls("a", text="checking"),
        user("wait"),
        result("ghost"),
        result("a"),
        result("a"),
    ]
    reply = inline(stubs[0], history)
    assert moves(reply.report) == [("a", 4, 1)]
    assert drops(reply.report) == [
        (3, 1, pb.DROP_REASON_ORPHANED_TOOL_RESULT),
        (5, 1, pb.DROP_REASON_ORPHANED_TOOL_RESULT),
    ]
    assert [m.tool_call_id for m in reply.messages] == ["", "", "a", "", ""]


def test_inline_openai_payload_of_a_moved_history(stubs: Any) -> None:
    reply = inline(stubs[0], INTERRUPTED, pb.OUTPUT_FORMAT_OPENAI)
    sent = json.loads(reply.payload_json)["messages"]
    assert [(m["role"], m.get("tool_call_id")) for m in sent] == [
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("tool", "b"),
        ("user", None),
        ("user", None),
    ]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["a", "b"]


def test_inline_anthropic_tool_results_follow_their_tool_use(stubs: Any) -> None:
    reply = inline(stubs[0], INTERRUPTED, pb.OUTPUT_FORMAT_ANTHROPIC)
    turns = json.loads(reply.payload_json)["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [b["id"] for b in turns[1]["content"] if b["type"] == "tool_use"] == ["a", "b"]
    assert [(b["type"], b.get("tool_use_id")) for b in turns[2]["content"]] == [
        ("tool_result", "a"),
        ("tool_result", "b"),
        ("text", None),
        ("text", None),
    ]
    assert moves(reply.report) == [("b", 3, 1), ("a", 4, 1)]


# --- BuildMessages, session mode -----------------------------------------------------------


def stored_session(sessions: Any, *messages: pb.Message) -> tuple[str, str]:
    uid = f"user-{uuid.uuid4().hex[:8]}"
    sid = sessions.CreateSession(spb.CreateSessionRequest(user_id=uid)).session.id
    sessions.AppendMessages(
        spb.AppendMessagesRequest(user_id=uid, session_id=sid, messages=list(messages))
    )
    return uid, sid


def session_build(context: Any, uid: str, sid: str, budget: int) -> pb.BuildMessagesResponse:
    return context.BuildMessages(  # type: ignore[no-any-return]
        pb.BuildMessagesRequest(
            user_message="go on",
            token_budget=budget,
            session=pb.SessionContext(user_id=uid, session_id=sid, memory=pb.MEMORY_MODE_OFF),
        )
    )


def test_session_mode_moves_stored_results(stubs: Any) -> None:
    context, sessions = stubs
    uid, sid = stored_session(sessions, *INTERRUPTED)
    reply = session_build(context, uid, sid, 4000)
    assert [m.tool_call_id for m in reply.messages[1:]] == ["", "", "a", "b", "", ""]
    assert moves(reply.report) == [("b", 3, 1), ("a", 4, 1)]
    assert drops(reply.report) == []


def test_session_mode_indexes_are_session_positions(stubs: Any) -> None:
    """A long session is read from its newest messages: every index of the report is a
    position in the session, the moves and removed calls as the dropped ranges."""
    context, sessions = stubs
    older = [user(f"old message {i} " + "words " * 300) for i in range(100)]
    tail = [calls("a", "c", text="on it"), user("wait"), result("a")]
    uid, sid = stored_session(sessions, *older, *tail)
    reply = session_build(context, uid, sid, 200)
    assert moves(reply.report) == [("a", 102, 100)]
    assert [(r.index, r.tool_call_id) for r in reply.report.removed_tool_calls] == [(100, "c")]
    assert drops(reply.report) == [(0, 100, pb.DROP_REASON_BUDGET)]
    assert [m.content for m in reply.messages[1:]] == ["on it", "result of a", "wait", "go on"]


# --- StreamChat: what the model is sent ----------------------------------------------------


async def chat_session(live: Live, *messages: pb.Message) -> tuple[str, str]:
    uid = f"user-{uuid.uuid4().hex[:8]}"
    created = await live.sessions.CreateSession(spb.CreateSessionRequest(user_id=uid))
    sid = created.session.id
    await live.sessions.AppendMessages(
        spb.AppendMessagesRequest(user_id=uid, session_id=sid, messages=list(messages))
    )
    return uid, sid


async def test_stream_chat_sends_openai_the_moved_history(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    uid, sid = await chat_session(live, *INTERRUPTED)
    fake.script(oa.text_reply(["Both done."]))
    events = await run_turn(
        live,
        cpb.StreamChatRequest(
            session=pb.SessionContext(user_id=uid, session_id=sid), user_message="go on"
        ),
    )
    assert completed(events).status == cpb.TURN_STATUS_OK
    sent = fake.bodies()[-1]["messages"]
    assert [(m["role"], m.get("tool_call_id")) for m in sent[1:]] == [
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("tool", "b"),
        ("user", None),
        ("user", None),
    ]


async def test_stream_chat_prebuilt_list_is_moved_too(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    fake.script(oa.text_reply(["Done."]))
    request = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=f"user-{uuid.uuid4().hex[:8]}"),
        user_message="go on",
        messages=[user("look it up"), calls("a"), user("wait"), result("a")],
    )
    assert completed(await run_turn(live, request)).status == cpb.TURN_STATUS_OK
    sent = fake.bodies()[-1]["messages"]
    assert [(m["role"], m.get("tool_call_id")) for m in sent] == [
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("user", None),
        ("user", None),
    ]


async def test_stream_chat_sends_anthropic_results_after_their_tool_use(
    anthropic_live: Live,
) -> None:
    live, fake = anthropic_live, anthropic_live.fake
    uid, sid = await chat_session(live, *INTERRUPTED)
    fake.script(an.text_reply(["Both done."]))
    events = await run_turn(
        live,
        cpb.StreamChatRequest(
            session=pb.SessionContext(user_id=uid, session_id=sid), user_message="go on"
        ),
    )
    assert completed(events).status == cpb.TURN_STATUS_OK
    turns = fake.bodies()[-1]["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [b["id"] for b in turns[1]["content"] if b["type"] == "tool_use"] == ["a", "b"]
    assert [(b["type"], b.get("tool_use_id")) for b in turns[2]["content"]] == [
        ("tool_result", "a"),
        ("tool_result", "b"),
        ("text", None),
        ("text", None),
    ]

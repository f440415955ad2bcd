"""StreamChat with the offline echo provider on a live server, and the event log export."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb

from tests.support.status import violations


@pytest.fixture(scope="module")
def stubs(address: str) -> Iterator[tuple[Any, Any]]:
    with grpc.insecure_channel(address) as channel:
        yield chat_pb2_grpc.ChatServiceStub(channel), sessions_pb2_grpc.SessionServiceStub(channel)


def turn(chat: Any, user: str, text: str, session_id: str = "", **extra: Any) -> list[Any]:
    request = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=session_id), user_message=text, **extra
    )
    return list(chat.StreamChat(request))


def kinds(events: list[Any]) -> list[str]:
    return [e.WhichOneof("event") for e in events]


def test_two_turns_with_echo(stubs: tuple[Any, Any]) -> None:
    chat, sessions = stubs
    user = f"u-{uuid.uuid4().hex[:8]}"
    first = turn(chat, user, "你好，我叫小明")
    names = kinds(first)
    assert names[0] == "turn_started" and names[-1] == "turn_completed"
    assert names.count("text_delta") >= 2 and "usage" in names
    started, done = first[0].turn_started, first[-1].turn_completed
    assert started.turn_index == 1 and started.user_message_id and started.provider == "echo"
    assert started.prompt_tokens_estimate == started.context.total_tokens > 0
    text = "".join(e.text_delta.text for e in first if e.WhichOneof("event") == "text_delta")
    assert done.final_text == text and "你好，我叫小明" in text
    assert done.status == cpb.TURN_STATUS_OK and done.assistant_message_id
    assert done.turn_usage.prompt_tokens_estimate == started.prompt_tokens_estimate

    second = turn(chat, user, "我叫什么?", started.session_id)
    assert second[0].turn_started.turn_index == 2
    # The first turn is in the context of the second: 1 system + 2 stored + the new message.
    assert "3 messages" in second[-1].turn_completed.final_text or "4 messages" in (
        second[-1].turn_completed.final_text
    )
    totals = second[-1].turn_completed.session_usage
    assert totals.completion_tokens == (
        done.turn_usage.completion_tokens + second[-1].turn_completed.turn_usage.completion_tokens
    )
    listed = sessions.ListMessages(
        spb.ListMessagesRequest(user_id=user, session_id=started.session_id)
    )
    assert [(m.message.role, m.turn_index) for m in listed.messages] == [
        (pb.ROLE_USER, 1),
        (pb.ROLE_ASSISTANT, 1),
        (pb.ROLE_USER, 2),
        (pb.ROLE_ASSISTANT, 2),
    ]

    exported = list(
        sessions.ExportEvents(spb.ExportEventsRequest(user_id=user, session_id=started.session_id))
    )
    events = [json.loads(e.json) for e in exported]
    assert [e["type"] for e in events] == [
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
    for e in events:
        assert list(e)[:2] == ["ts", "session_id"] and e["ts"].endswith("Z")
        assert e["session_id"] == started.session_id
    end = events[4]
    assert end["turn"] == 1 and end["meta"]["status"] == "ok" and end["meta"]["stepCount"] == 1
    # The echo provider's counts are its own, not a model's: marked estimated.
    assert set(end["meta"]["tokens"]) == {"prompt", "completion", "total", "estimated"}
    assert events[1]["content"] == "你好，我叫小明" and events[1]["meta"]["tokens"]["prompt"] > 0


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (cpb.StreamChatRequest(user_message="hi"), "session.user_id"),
        (cpb.StreamChatRequest(session=pb.SessionContext(user_id="u")), "user_message"),
        (
            cpb.StreamChatRequest(
                session=pb.SessionContext(user_id="u"),
                user_message="hi",
                tools=[cpb.ToolDefinition(name="bad name")],
            ),
            "tools[0].name",
        ),
        (
            cpb.StreamChatRequest(
                session=pb.SessionContext(user_id="u"),
                tool_results=[cpb.ToolResult(tool_call_id="c1", content="x")],
            ),
            "session.session_id",
        ),
        (
            cpb.StreamChatRequest(
                session=pb.SessionContext(user_id="u", session_id="0" * 32),
                user_message="and this",
                tool_results=[cpb.ToolResult(tool_call_id="c1", content="x")],
                tool_protocol=cpb.TOOL_PROTOCOL_REACT,
            ),
            "user_message",
        ),
    ],
)
def test_bad_requests(stubs: tuple[Any, Any], request_: Any, field: str) -> None:
    chat, _ = stubs
    with pytest.raises(grpc.RpcError) as err:
        list(chat.StreamChat(request_))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in violations(err.value)


def test_other_users_session_is_unknown(stubs: tuple[Any, Any]) -> None:
    chat, sessions = stubs
    owner = f"u-{uuid.uuid4().hex[:8]}"
    session_id = turn(chat, owner, "hello")[0].turn_started.session_id
    with pytest.raises(grpc.RpcError) as err:
        turn(chat, "intruder", "hi", session_id)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as err:
        list(
            sessions.ExportEvents(
                spb.ExportEventsRequest(user_id="intruder", session_id=session_id)
            )
        )
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as err:
        turn(chat, owner, "hi", "0" * 32)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND

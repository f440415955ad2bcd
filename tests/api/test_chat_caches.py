"""What a turn reads from memory instead of the database (a session's newest messages, its
compression summary, the skills) follows every write made between two turns through the
other services."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, prompts_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import prompts_pb2 as ppb
from contextd.v1 import sessions_pb2 as spb


class Stubs:
    def __init__(self, channel: grpc.Channel) -> None:
        self.chat = chat_pb2_grpc.ChatServiceStub(channel)
        self.sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        self.prompts = prompts_pb2_grpc.PromptServiceStub(channel)


@pytest.fixture(scope="module")
def stubs(address: str) -> Iterator[Stubs]:
    with grpc.insecure_channel(address) as channel:
        yield Stubs(channel)


def turn(stubs: Stubs, user: str, session_id: str = "", host: str = "") -> list[Any]:
    request = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=session_id, host=host),
        user_message=f"a question {uuid.uuid4().hex[:6]}",
    )
    events = list(stubs.chat.StreamChat(request))
    assert events[-1].turn_completed.status == cpb.TURN_STATUS_OK
    return events


def test_messages_appended_between_turns_are_in_the_next_window(stubs: Stubs) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    session_id = turn(stubs, user)[0].turn_started.session_id
    stubs.sessions.AppendMessages(
        spb.AppendMessagesRequest(
            user_id=user,
            session_id=session_id,
            messages=[
                pb.Message(role=pb.ROLE_USER, content="appended by the host"),
                pb.Message(role=pb.ROLE_ASSISTANT, content="and its answer"),
            ],
            turn_index=2,
        )
    )
    started = turn(stubs, user, session_id)[0].turn_started
    assert started.turn_index == 3  # numbered after the appended turn
    assert started.context.history_kept == 4


def test_a_compression_summary_added_between_turns_is_in_the_next_context(
    stubs: Stubs,
) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    first = turn(stubs, user)
    session_id = first[0].turn_started.session_id
    assert not turn(stubs, user, session_id)[0].turn_started.context.summary_included
    ids = [first[0].turn_started.user_message_id, first[-1].turn_completed.assistant_message_id]
    stubs.sessions.AddCompressionSummary(
        spb.AddCompressionSummaryRequest(
            user_id=user,
            session_id=session_id,
            message_ids=ids,
            start_message_id=ids[0],
            summary="the user asked a first question",
        )
    )
    started = turn(stubs, user, session_id)[0].turn_started
    assert started.context.summary_included
    assert started.context.history_kept == 2  # the second turn; the first is summarized


def test_skills_written_between_turns_are_in_the_next_context(stubs: Stubs) -> None:
    user, host = f"u-{uuid.uuid4().hex[:8]}", f"host{uuid.uuid4().hex[:8]}"
    first = turn(stubs, user, host=host)[0].turn_started
    session_id, before = first.session_id, first.context.system_tokens
    skill = ppb.Skill(name=f"skill-{host}", description="d", prompt="p", apps=[host], enabled=True)
    stubs.prompts.UpsertSkill(ppb.UpsertSkillRequest(skill=skill))
    with_skill = turn(stubs, user, session_id, host)[0].turn_started
    assert with_skill.context.system_tokens > before
    stubs.prompts.DeleteSkill(ppb.DeleteSkillRequest(name=skill.name))
    without = turn(stubs, user, session_id, host)[0].turn_started
    assert without.context.system_tokens == before


def test_a_session_deleted_between_turns_is_gone(stubs: Stubs) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    session_id = turn(stubs, user)[0].turn_started.session_id
    stubs.sessions.DeleteSession(spb.DeleteSessionRequest(user_id=user, session_id=session_id))
    with pytest.raises(grpc.RpcError) as error:
        turn(stubs, user, session_id)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_session_summary_set_between_turns_is_in_the_next_turn_of_another_session(
    stubs: Stubs,
) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    # Created, never chatted in: no work after a turn writes its summary meanwhile.
    created = stubs.sessions.CreateSession(spb.CreateSessionRequest(user_id=user, title="Tea"))
    first = turn(stubs, user)[0].turn_started
    second = turn(stubs, user, first.session_id)[0].turn_started
    assert second.context.system_tokens == first.context.system_tokens
    stubs.sessions.SetSessionSummary(
        spb.SetSessionSummaryRequest(
            user_id=user, session_id=created.session.id, summary="a long talk about tea"
        )
    )
    third = turn(stubs, user, first.session_id)[0].turn_started
    assert third.context.system_tokens > second.context.system_tokens


def test_turn_started_reports_each_context_layer_in_session_mode(stubs: Stubs) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    first = turn(stubs, user)[0].turn_started
    assert [layer.name for layer in first.context.context_layers] == [
        "system",
        "scenario",
        "session",
        "memory",
        "recent_sessions",
        "window",
        "user_message",
    ]
    second = turn(stubs, user, first.session_id)[0].turn_started
    window = {layer.name: layer for layer in second.context.context_layers}["window"]
    assert window.included and window.items_kept == 2  # the first turn's two messages
    # Prebuilt mode has no context layers.
    prebuilt = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user),
        messages=[pb.Message(role=pb.ROLE_SYSTEM, content="Be brief.")],
        user_message="hello",
    )
    events = list(stubs.chat.StreamChat(prebuilt))
    started = events[0].turn_started
    assert list(started.context.context_layers) == []

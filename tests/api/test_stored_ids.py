"""Message and memory ids as callers see them: 22 opaque URL-safe characters, not the
store's row numbers; the same on every replica and after a restart. A string of the
wrong form is INVALID_ARGUMENT naming its field; one of the right form this deployment
did not give out (a number as ids once were, another kind's id, a forgery) is NOT_FOUND,
exactly as a deleted row or another user's is."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

from tests.support.server import start_server
from tests.support.status import violations

OPAQUE = re.compile(r"[A-Za-z0-9_-]{22}")
# Not of an id's form: refused before any look-up, whatever the store holds.
NOT_IDS = ["𝟙", "١", "¹", "①", "²", " 1", "1 ", "+1", "a.b", "x" * 65, "x" * 100_000]
# Of an id's form, but never given out by this server: the numbers ids once were, a
# number too large for the database, base64 of nothing the key made.
UNKNOWN = ["1", "2", "0x1", "9223372036854775808", "1" * 19, "A" * 22, "0" * 32]


@pytest.fixture(scope="module")
def channel(address: str) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(address) as channel:
        yield channel


def _code(call: object) -> grpc.StatusCode:
    try:
        assert callable(call)
        call()
    except grpc.RpcError as error:
        return error.code()
    return grpc.StatusCode.OK


def _conversation(channel: grpc.Channel, user: str) -> tuple[str, list[str]]:
    """A session of ``user`` with a question and its answer: its id and the messages' ids."""
    sessions = sessions_pb2_grpc.SessionServiceStub(channel)
    sid = sessions.CreateSession(spb.CreateSessionRequest(user_id=user)).session.id
    appended = sessions.AppendMessages(
        spb.AppendMessagesRequest(
            user_id=user,
            session_id=sid,
            messages=[
                pb.Message(role=pb.ROLE_USER, content="Which train?"),
                pb.Message(role=pb.ROLE_ASSISTANT, content="The 8:15."),
            ],
        )
    )
    return sid, [m.message.id for m in appended.messages]


def test_ids_are_opaque_and_name_nothing_of_another_kind(channel: grpc.Channel) -> None:
    user = f"ids-{uuid.uuid4().hex[:8]}"
    sessions = sessions_pb2_grpc.SessionServiceStub(channel)
    memory = memory_pb2_grpc.MemoryServiceStub(channel)
    context = context_pb2_grpc.ContextServiceStub(channel)
    sid, (question, answer) = _conversation(channel, user)
    first = memory.AddMemory(mpb.AddMemoryRequest(user_id=user, content="I take the train."))
    second = memory.AddMemory(mpb.AddMemoryRequest(user_id=user, content="I live in Lyon."))
    shown = [question, answer, first.memory.id, second.memory.id]
    assert all(OPAQUE.fullmatch(i) for i in shown), shown
    assert not any(i.isdigit() for i in shown) and len(set(shown)) == 4
    # Listed, searched and collected under the same ids.
    listed = sessions.ListMessages(spb.ListMessagesRequest(user_id=user, session_id=sid))
    assert [m.message.id for m in listed.messages] == [question, answer]
    found = memory.ListMemories(mpb.ListMemoriesRequest(user_id=user)).memories
    assert {m.id for m in found} == {first.memory.id, second.memory.id}
    collected = context.Collect(pb.CollectRequest(user_id=user, message_id=answer, remember=True))
    assert collected.message_id == answer and OPAQUE.fullmatch(collected.memory_id)
    remembered = memory.ListMemories(mpb.ListMemoriesRequest(user_id=user)).memories
    [kept] = [m for m in remembered if m.id == collected.memory_id]
    assert kept.source_message_id == answer and kept.source_session_id == sid
    # A memory's id never names a message, nor a message's a memory.
    wrong_kind = pb.CollectRequest(user_id=user, message_id=first.memory.id)
    assert _code(lambda: context.Collect(wrong_kind)) == grpc.StatusCode.NOT_FOUND
    delete = mpb.DeleteMemoryRequest(user_id=user, memory_id=answer)
    assert _code(lambda: memory.DeleteMemory(delete)) == grpc.StatusCode.NOT_FOUND
    assert len(memory.ListMemories(mpb.ListMemoriesRequest(user_id=user)).memories) == 3


@pytest.mark.parametrize("memory_id", NOT_IDS, ids=lambda s: f"{s[:8]!r}x{len(s)}")
def test_a_malformed_id_is_refused_naming_its_field(channel: grpc.Channel, memory_id: str) -> None:
    memory = memory_pb2_grpc.MemoryServiceStub(channel)
    user = f"ids-{uuid.uuid4().hex[:8]}"
    added = memory.AddMemory(mpb.AddMemoryRequest(user_id=user, content="I take the train."))
    with pytest.raises(grpc.RpcError) as raised:
        memory.DeleteMemory(mpb.DeleteMemoryRequest(user_id=user, memory_id=memory_id))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert list(violations(raised.value)) == ["memory_id"]
    assert len(raised.value.details() or "") < 100  # quoting nothing of it
    listed = memory.ListMemories(mpb.ListMemoriesRequest(user_id=user)).memories
    assert [m.id for m in listed] == [added.memory.id]


@pytest.mark.parametrize("message_id", UNKNOWN)
def test_an_id_never_given_out_is_unknown(channel: grpc.Channel, message_id: str) -> None:
    context = context_pb2_grpc.ContextServiceStub(channel)
    memory = memory_pb2_grpc.MemoryServiceStub(channel)
    user = f"ids-{uuid.uuid4().hex[:8]}"
    _conversation(channel, user)  # rows 1, 2... exist: a number still names none of them
    request = pb.CollectRequest(user_id=user, message_id=message_id)
    assert _code(lambda: context.Collect(request)) == grpc.StatusCode.NOT_FOUND
    source = mpb.AddMemoryRequest(user_id=user, content="x", source_message_id=message_id)
    assert _code(lambda: memory.AddMemory(source)) == grpc.StatusCode.NOT_FOUND
    assert memory.ListMemories(mpb.ListMemoriesRequest(user_id=user)).memories == []


def test_a_changed_character_names_nothing(channel: grpc.Channel) -> None:
    context = context_pb2_grpc.ContextServiceStub(channel)
    user = f"ids-{uuid.uuid4().hex[:8]}"
    _, (_, answer) = _conversation(channel, user)
    for k in range(len(answer)):
        for other in ("A", "B", "-"):
            forged = answer[:k] + other + answer[k + 1 :]
            if forged == answer:
                continue
            request = pb.CollectRequest(user_id=user, message_id=forged)
            with pytest.raises(grpc.RpcError) as raised:
                context.Collect(request)
            assert raised.value.code() == grpc.StatusCode.NOT_FOUND, forged


def test_another_users_ids_answer_as_unknown_ones(channel: grpc.Channel) -> None:
    """No answer tells another user's message or memory from one that does not exist."""
    context = context_pb2_grpc.ContextServiceStub(channel)
    memory = memory_pb2_grpc.MemoryServiceStub(channel)
    sessions = sessions_pb2_grpc.SessionServiceStub(channel)
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    sid, (_, answer) = _conversation(channel, alice)
    kept = memory.AddMemory(mpb.AddMemoryRequest(user_id=alice, content="I ski.")).memory.id
    deleted, (_, gone) = _conversation(channel, alice)
    forgotten = memory.AddMemory(mpb.AddMemoryRequest(user_id=alice, content="I row.")).memory.id
    memory.DeleteMemory(mpb.DeleteMemoryRequest(user_id=alice, memory_id=forgotten))
    sessions.DeleteSession(spb.DeleteSessionRequest(user_id=alice, session_id=deleted))

    def answer_to(call: object) -> tuple[grpc.StatusCode, str]:
        try:
            assert callable(call)
            call()
        except grpc.RpcError as error:
            return error.code(), error.details() or ""
        return grpc.StatusCode.OK, ""

    collect = [
        answer_to(lambda m=m: context.Collect(pb.CollectRequest(user_id=bob, message_id=m)))
        for m in (answer, gone)
    ]
    delete = [
        answer_to(
            lambda m=m: memory.DeleteMemory(mpb.DeleteMemoryRequest(user_id=bob, memory_id=m))
        )
        for m in (kept, forgotten)
    ]
    get = [
        answer_to(lambda s=s: sessions.GetSession(spb.GetSessionRequest(user_id=bob, session_id=s)))
        for s in (sid, "0" * 32)
    ]
    for theirs, unknown in (collect, delete):
        assert theirs == unknown and theirs[0] == grpc.StatusCode.NOT_FOUND
    assert get[0][0] == get[1][0] == grpc.StatusCode.NOT_FOUND
    assert get[0][1].replace(sid, "0" * 32) == get[1][1]
    # Alice's own are untouched.
    left = memory.ListMemories(mpb.ListMemoriesRequest(user_id=alice)).memories
    assert [m.id for m in left] == [kept]


def test_ids_stay_the_same_after_a_restart(tmp_path: Path) -> None:
    first = start_server(tmp_path)
    try:
        with grpc.insecure_channel(first.address) as channel:
            sid, ids = _conversation(channel, "restarted")
            memory_id = (
                memory_pb2_grpc.MemoryServiceStub(channel)
                .AddMemory(mpb.AddMemoryRequest(user_id="restarted", content="I ski."))
                .memory.id
            )
    finally:
        assert first.stop() == 0
    second = start_server(tmp_path)
    try:
        with grpc.insecure_channel(second.address) as channel:
            sessions = sessions_pb2_grpc.SessionServiceStub(channel)
            listed = sessions.ListMessages(
                spb.ListMessagesRequest(user_id="restarted", session_id=sid)
            )
            assert [m.message.id for m in listed.messages] == ids
            memory = memory_pb2_grpc.MemoryServiceStub(channel)
            memory.DeleteMemory(mpb.DeleteMemoryRequest(user_id="restarted", memory_id=memory_id))
    finally:
        assert second.stop() == 0

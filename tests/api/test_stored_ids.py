"""Stored ids are ASCII digits within range: look-alike digits never alias a real id, and
an id too large for the database is an unknown id, not an internal error."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

from tests.support.status import violations

# Each reads as a number to str.isdigit(); the first four as 1 to int().
NOT_IDS = ["𝟙", "١", "¹", "①", "²", "9223372036854775808", "1" * 19, " 1", "1 ", "+1", "0x1"]


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


@pytest.mark.parametrize("memory_id", NOT_IDS)
def test_delete_memory_with_a_look_alike_id_deletes_nothing(
    channel: grpc.Channel, memory_id: str
) -> None:
    memory = memory_pb2_grpc.MemoryServiceStub(channel)
    user = f"ids-{uuid.uuid4().hex[:8]}"
    added = memory.AddMemory(mpb.AddMemoryRequest(user_id=user, content="I take the train."))
    request = mpb.DeleteMemoryRequest(user_id=user, memory_id=memory_id)
    assert _code(lambda: memory.DeleteMemory(request)) == grpc.StatusCode.NOT_FOUND
    listed = memory.ListMemories(mpb.ListMemoriesRequest(user_id=user)).memories
    assert [m.id for m in listed] == [added.memory.id]


@pytest.mark.parametrize("message_id", NOT_IDS)
def test_look_alike_message_ids_are_unknown(channel: grpc.Channel, message_id: str) -> None:
    context = context_pb2_grpc.ContextServiceStub(channel)
    request = pb.CollectRequest(user_id="ids-user", message_id=message_id)
    assert _code(lambda: context.Collect(request)) == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("session_id", ["𝟙", "9223372036854775808"])
def test_look_alike_session_ids_are_unknown(channel: grpc.Channel, session_id: str) -> None:
    sessions = sessions_pb2_grpc.SessionServiceStub(channel)
    request = spb.GetSessionRequest(user_id="ids-user", session_id=session_id)
    assert _code(lambda: sessions.GetSession(request)) == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("message_id", NOT_IDS)
def test_a_memory_source_must_be_a_stored_id(channel: grpc.Channel, message_id: str) -> None:
    memory = memory_pb2_grpc.MemoryServiceStub(channel)
    request = mpb.AddMemoryRequest(user_id="ids-user", content="x", source_message_id=message_id)
    with pytest.raises(grpc.RpcError) as raised:
        memory.AddMemory(request)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "source_message_id" in violations(raised.value)


def test_a_long_id_is_cut_in_the_message(channel: grpc.Channel) -> None:
    memory = memory_pb2_grpc.MemoryServiceStub(channel)
    request = mpb.DeleteMemoryRequest(user_id="ids-user", memory_id="x" * 100_000)
    with pytest.raises(grpc.RpcError) as raised:
        memory.DeleteMemory(request)
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    assert len(raised.value.details() or "") < 200

"""A memory's source (AddMemory's source_session_id and source_message_id) must be the
caller's own session and message: another user's is refused and nothing is stored."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import sessions_pb2 as spb

# Each test runs against a server on SQLite and one on PostgreSQL.
pytestmark = pytest.mark.both_backends


@pytest.fixture(scope="module")
def stubs(
    address: str,
) -> Iterator[tuple[sessions_pb2_grpc.SessionServiceStub, memory_pb2_grpc.MemoryServiceStub]]:
    with grpc.insecure_channel(address) as channel:
        yield (
            sessions_pb2_grpc.SessionServiceStub(channel),
            memory_pb2_grpc.MemoryServiceStub(channel),
        )


def _session_with_message(
    sessions: sessions_pb2_grpc.SessionServiceStub, user: str
) -> tuple[str, str]:
    session = sessions.CreateSession(spb.CreateSessionRequest(user_id=user)).session
    appended = sessions.AppendMessages(
        spb.AppendMessagesRequest(
            user_id=user,
            session_id=session.id,
            messages=[pb.Message(role=pb.ROLE_USER, content="I like tea")],
        )
    )
    return session.id, appended.messages[0].message.id


def test_a_memory_source_must_be_the_callers(
    stubs: tuple[sessions_pb2_grpc.SessionServiceStub, memory_pb2_grpc.MemoryServiceStub],
) -> None:
    sessions, memory = stubs
    alice, bob = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("alice", "bob"))
    alice_session, alice_message = _session_with_message(sessions, alice)
    other_session, _ = _session_with_message(sessions, alice)
    bob_session, bob_message = _session_with_message(sessions, bob)

    def add(session_id: str = "", message_id: str = "") -> grpc.StatusCode:
        request = mpb.AddMemoryRequest(
            user_id=alice,
            content="Alice likes tea",
            source_session_id=session_id,
            source_message_id=message_id,
        )
        try:
            memory.AddMemory(request)
        except grpc.RpcError as error:
            return error.code()
        return grpc.StatusCode.OK

    # Bob's are answered as unknown ones are.
    assert add(bob_session) == grpc.StatusCode.NOT_FOUND
    assert add(message_id=bob_message) == grpc.StatusCode.NOT_FOUND
    assert add(alice_session, bob_message) == grpc.StatusCode.NOT_FOUND
    assert add("no-such-session") == grpc.StatusCode.NOT_FOUND
    assert add(message_id="999999999") == grpc.StatusCode.NOT_FOUND
    assert add(other_session, alice_message) == grpc.StatusCode.INVALID_ARGUMENT
    assert memory.ListMemories(mpb.ListMemoriesRequest(user_id=alice)).memories == []
    assert add(alice_session, alice_message) == grpc.StatusCode.OK
    [stored] = memory.ListMemories(mpb.ListMemoriesRequest(user_id=alice)).memories
    assert (stored.source_session_id, stored.source_message_id) == (alice_session, alice_message)

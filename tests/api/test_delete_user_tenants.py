"""DeleteUser erases one user of one tenant: a user of the same name in another tenant
keeps everything, event log included, whoever asks (the user's own key or a service key
of their tenant)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc, users_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb
from contextd.v1 import users_pb2 as upb

from tests.support.auth import bearer, create_key
from tests.support.server import ServerProcess, start_server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ServerProcess, dict[str, str]]]:
    keys = {
        "acme": create_key(tmp_path, "bob", "--tenant", "acme"),
        "globex": create_key(tmp_path, "bob", "--tenant", "globex"),
        "globex-service": create_key(tmp_path, "backend", "--tenant", "globex", "--service"),
    }
    proc = start_server(tmp_path, "--auth", "api-key")
    yield proc, keys
    assert proc.stop() == 0


def _fill(channel: grpc.Channel, key: str) -> str:
    """A chat turn (a session, its messages and event log) and a memory; the session id."""
    chat = chat_pb2_grpc.ChatServiceStub(channel)
    request = cpb.StreamChatRequest(session=pb.SessionContext(), user_message="I like tea")
    events = list(chat.StreamChat(request, metadata=bearer(key)))
    memory = memory_pb2_grpc.MemoryServiceStub(channel)
    memory.AddMemory(mpb.AddMemoryRequest(content="Bob drinks tea"), metadata=bearer(key))
    return str(events[0].turn_started.session_id)


def _holds(channel: grpc.Channel, key: str, user: str = "") -> tuple[int, int, int]:
    """How many sessions, memories and event-log lines the key's user (or ``user``, for a
    service key) has."""
    sessions = sessions_pb2_grpc.SessionServiceStub(channel)
    listed = sessions.ListSessions(
        spb.ListSessionsRequest(user_id=user), metadata=bearer(key)
    ).sessions
    memory = memory_pb2_grpc.MemoryServiceStub(channel)
    memories = memory.ListMemories(
        mpb.ListMemoriesRequest(user_id=user), metadata=bearer(key)
    ).memories
    lines = 0
    for session in listed:
        request = spb.ExportEventsRequest(user_id=user, session_id=session.id)
        lines += len(list(sessions.ExportEvents(request, metadata=bearer(key))))
    return len(listed), len(memories), lines


@pytest.mark.parametrize("erasing_key", ["globex", "globex-service"])
def test_erasing_a_user_leaves_the_same_name_in_another_tenant(
    server: tuple[ServerProcess, dict[str, str]], erasing_key: str
) -> None:
    proc, keys = server
    with grpc.insecure_channel(proc.address) as channel:
        _fill(channel, keys["acme"])
        _fill(channel, keys["globex"])
        before = _holds(channel, keys["acme"])
        assert before[0] == 1 and before[1] >= 1 and before[2] > 0
        users = users_pb2_grpc.UserServiceStub(channel)
        erased = users.DeleteUser(
            upb.DeleteUserRequest(user_id="bob", confirm_user_id="bob"),
            metadata=bearer(keys[erasing_key]),
        )
        assert (erased.sessions, erased.event_logs) == (1, 1)
        assert _holds(channel, keys["acme"]) == before
        if erasing_key == "globex-service":
            assert _holds(channel, keys["globex-service"], "bob") == (0, 0, 0)
        # Bob's key in globex went with him, at once.
        with pytest.raises(grpc.RpcError) as refused:
            _holds(channel, keys["globex"])
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED

"""Turn numbers are the server's and only grow within a session: messages appended
between chat turns take the next turn, and a chat turn after them the one after."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb

from tests.support.status import violations

# Each test runs against a server on SQLite and one on PostgreSQL.
pytestmark = pytest.mark.both_backends


@pytest.fixture(scope="module")
def channel(address: str) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(address) as channel:
        yield channel


def test_turns_only_grow(channel: grpc.Channel) -> None:
    chat = chat_pb2_grpc.ChatServiceStub(channel)
    sessions = sessions_pb2_grpc.SessionServiceStub(channel)
    user = f"turns-{uuid.uuid4().hex[:8]}"

    def turn(session_id: str = "") -> str:
        context = pb.SessionContext(user_id=user, session_id=session_id)
        request = cpb.StreamChatRequest(session=context, user_message="hello")
        events = list(chat.StreamChat(request))
        return str(events[0].turn_started.session_id)

    def append(session_id: str, turn_index: int = 0) -> list[int]:
        request = spb.AppendMessagesRequest(
            user_id=user,
            session_id=session_id,
            messages=[pb.Message(role=pb.ROLE_USER, content="noted by the host")],
            turn_index=turn_index,
        )
        return [m.turn_index for m in sessions.AppendMessages(request).messages]

    session_id = turn()
    assert append(session_id) == [2]
    assert append(session_id, 2) == [2]  # the newest turn may go on
    turn(session_id)
    with pytest.raises(grpc.RpcError) as raised:
        append(session_id, 1)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violations(raised.value) == ["turn_index"]
    assert append(session_id, 7) == [7]

    listed = sessions.ListMessages(spb.ListMessagesRequest(user_id=user, session_id=session_id))
    numbers = [m.turn_index for m in listed.messages]
    assert numbers == sorted(numbers) and numbers[0] == 1 and numbers[-1] == 7
    exported = sessions.ExportEvents(spb.ExportEventsRequest(user_id=user, session_id=session_id))
    starts = [json.loads(e.json)["turn"] for e in exported if e.type == "turn_start"]
    assert starts == [1, 3]

"""Audit lines on a real server: one per call on user data, naming tenant, user, credential,
method, outcome and resource ids, for unary, streamed chat and ExportEvents calls, failed
ones included; none for calls on no user data; never a secret."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, context_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.auth import bearer, create_key, key_id
from tests.support.server import ServerProcess, start_server

SESSIONS = "/contextd.v1.SessionService/"
NO_SUCH_SESSION = "0" * 32


@dataclass
class Audited:
    proc: ServerProcess
    channel: grpc.Channel
    alice: str
    service: str

    @property
    def sessions(self) -> sessions_pb2_grpc.SessionServiceStub:
        return sessions_pb2_grpc.SessionServiceStub(self.channel)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Audited]:
    data_dir = tmp_path_factory.mktemp("audit")
    alice = create_key(data_dir, "alice")
    service = create_key(data_dir, "backend", "--service")
    proc = start_server(data_dir, "--auth", "api-key")
    try:
        with grpc.insecure_channel(proc.address) as channel:
            yield Audited(proc, channel, alice, service)
    finally:
        assert proc.stop() == 0
    logged = repr(proc.log_lines)
    for token in (alice, service):
        assert token.split("_", 2)[2] not in logged, "a key's secret is in the server log"


def audit_line(proc: ServerProcess, method: str, **wanted: object) -> dict[str, object]:
    """The audit line of ``method`` with the ``wanted`` values; waits for it (the server
    writes it as the call ends, which may be after the client saw the answer)."""
    deadline = time.monotonic() + 5
    while True:
        for line in proc.logs("audit"):
            if line.get("method") == method and wanted.items() <= line.items():
                assert line["logger"] == "contextd.audit"
                return line
        assert time.monotonic() < deadline, (method, wanted, proc.logs("audit")[-5:])
        time.sleep(0.05)


def audited_methods(proc: ServerProcess) -> set[object]:
    return {line["method"] for line in proc.logs("audit")}


def test_unary_calls_name_user_credential_resources_and_returned_ids(server: Audited) -> None:
    auth = bearer(server.alice)
    created = server.sessions.CreateSession(spb.CreateSessionRequest(), metadata=auth)
    sid = created.session.id
    line = audit_line(server.proc, SESSIONS + "CreateSession", returned={"session.id": sid})
    assert line["tenant"] == "default"
    assert line["user"] == "alice"
    assert line["credential"] == key_id(server.alice)
    assert line["code"] == "OK"
    assert line["resources"] == {}

    server.sessions.GetSession(spb.GetSessionRequest(session_id=sid), metadata=auth)
    line = audit_line(server.proc, SESSIONS + "GetSession", resources={"session_id": sid})
    assert line["user"] == "alice" and line["code"] == "OK"


def test_failed_calls_are_logged_with_their_code(server: Audited) -> None:
    with pytest.raises(grpc.RpcError) as missing:
        server.sessions.DeleteSession(
            spb.DeleteSessionRequest(session_id=NO_SUCH_SESSION), metadata=bearer(server.alice)
        )
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    audit_line(
        server.proc,
        SESSIONS + "DeleteSession",
        code="NOT_FOUND",
        user="alice",
        resources={"session_id": NO_SUCH_SESSION},
    )

    with pytest.raises(grpc.RpcError) as denied:
        server.sessions.ListSessions(
            spb.ListSessionsRequest(user_id="bob"), metadata=bearer(server.alice)
        )
    assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
    audit_line(
        server.proc,
        SESSIONS + "ListSessions",
        code="PERMISSION_DENIED",
        user="bob",
        credential=key_id(server.alice),
    )

    with pytest.raises(grpc.RpcError) as anonymous:
        server.sessions.ListSessions(spb.ListSessionsRequest(user_id="carol"))
    assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED
    audit_line(
        server.proc, SESSIONS + "ListSessions", code="UNAUTHENTICATED", user="carol", credential=""
    )


def test_a_service_credential_is_logged_with_the_user_it_acts_for(server: Audited) -> None:
    server.sessions.ListSessions(
        spb.ListSessionsRequest(user_id="dave"), metadata=bearer(server.service)
    )
    audit_line(
        server.proc,
        SESSIONS + "ListSessions",
        code="OK",
        user="dave",
        credential=key_id(server.service),
    )


def test_a_streamed_chat_turn_and_export_events(server: Audited) -> None:
    auth = bearer(server.alice)
    chat = chat_pb2_grpc.ChatServiceStub(server.channel)
    # No session at all: a turn of the key's user on a new session, audited as such.
    request = cpb.StreamChatRequest(user_message="hello")
    events = list(chat.StreamChat(request, metadata=auth))
    sid = events[0].turn_started.session_id
    assert events[-1].WhichOneof("event") == "turn_completed"
    # The line names the session the turn created, and the user message it stored.
    line = audit_line(server.proc, "/contextd.v1.ChatService/StreamChat", code="OK", user="alice")
    assert line["resources"] == {}
    assert line["returned"] == {
        "turn_started.session_id": sid,
        "turn_started.user_message_id": events[0].turn_started.user_message_id,
    }

    chat_again = cpb.StreamChatRequest(
        session=pb.SessionContext(session_id=sid), user_message="more"
    )
    list(chat.StreamChat(chat_again, metadata=auth))
    audit_line(
        server.proc,
        "/contextd.v1.ChatService/StreamChat",
        resources={"session.session_id": sid},
        code="OK",
    )

    exported = list(
        server.sessions.ExportEvents(spb.ExportEventsRequest(session_id=sid), metadata=auth)
    )
    assert exported
    audit_line(
        server.proc,
        SESSIONS + "ExportEvents",
        code="OK",
        user="alice",
        resources={"session_id": sid},
    )

    with pytest.raises(grpc.RpcError) as missing:
        list(
            server.sessions.ExportEvents(
                spb.ExportEventsRequest(session_id=NO_SUCH_SESSION), metadata=auth
            )
        )
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    audit_line(
        server.proc,
        SESSIONS + "ExportEvents",
        code="NOT_FOUND",
        resources={"session_id": NO_SUCH_SESSION},
    )


def test_calls_on_no_user_data_get_no_audit_line(server: Audited) -> None:
    auth = bearer(server.alice)
    context = context_pb2_grpc.ContextServiceStub(server.channel)
    context.CountTokens(pb.CountTokensRequest(texts=["hi"]), metadata=auth)
    context.ListTokenizers(pb.ListTokenizersRequest(), metadata=auth)
    build = pb.BuildMessagesRequest(user_message="hi", token_budget=100)
    context.BuildMessages(build, metadata=auth)
    health_pb2_grpc.HealthStub(server.channel).Check(health_pb2.HealthCheckRequest())
    # The last of these calls is on user data: once its line is there, the others' would be.
    build.session.CopyFrom(pb.SessionContext())
    with contextlib.suppress(grpc.RpcError):  # audited whatever its outcome
        context.BuildMessages(build, metadata=auth)
    audit_line(server.proc, "/contextd.v1.ContextService/BuildMessages", user="alice")
    logged = audited_methods(server.proc)
    for method in ("CountTokens", "ListTokenizers"):
        assert f"/contextd.v1.ContextService/{method}" not in logged
    assert "/grpc.health.v1.Health/Check" not in logged
    builds = [
        line
        for line in server.proc.logs("audit")
        if line["method"] == "/contextd.v1.ContextService/BuildMessages"
    ]
    assert len(builds) == 1


def test_auth_none_names_the_request_user_and_no_credential(tmp_path: Path) -> None:
    proc = start_server(tmp_path)
    try:
        with grpc.insecure_channel(proc.address) as channel:
            sessions = sessions_pb2_grpc.SessionServiceStub(channel)
            sessions.ListSessions(spb.ListSessionsRequest(user_id="erin"))
        line = audit_line(proc, SESSIONS + "ListSessions", user="erin")
        assert line["credential"] == "" and line["tenant"] == "default"
        assert line["code"] == "OK"
        assert json.loads(json.dumps(line)) == line
    finally:
        assert proc.stop() == 0

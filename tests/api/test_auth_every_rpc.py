"""`--auth api-key` on every RPC of every contextd.v1 service, on both ports.

The RPCs are read from the generated descriptors when the tests are collected, so an
RPC added later is covered without editing this file. Every one of them, streaming ones
included, answers UNAUTHENTICATED with the one generic message to a call without a
usable credential. A key of another user that names the key owner's user id gets
PERMISSION_DENIED from every RPC whose request carries a user id; the RPCs without one
(token counting, plain builds, prompt templates and skills) touch no user's data and
serve any valid key.

A service key of another tenant, on either port, acts inside its own tenant only, even
when it names a user of the same name: every RPC given ids of the key owner's tenant (a
session, message or memory, filled in by field name) answers NOT_FOUND, as if they did
not exist; one that names a user and no such id (creating, listing, searching) serves
the service's own tenant (OK), and nothing of the other tenant appears in its answer;
one without a user is served as for any key.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import aiohttp
import grpc
import pytest
from contextd.v1 import memory_pb2, memory_pb2_grpc, sessions_pb2, sessions_pb2_grpc
from google.protobuf.message import Message

from tests.support.auth import (
    Rpc,
    StoredIds,
    bearer,
    create_key,
    every_rpc,
    key_id,
    keys_command,
    with_ids,
)
from tests.support.grpc_web import call, method_url, web_address
from tests.support.server import ServerProcess, start_server

ORIGIN = "https://addin.example.com"
GENERIC = "a valid credential is required"
RPCS = list(every_rpc())
WITH_USER = [rpc for rpc in RPCS if rpc.user_id_field]
WITHOUT_USER = [rpc for rpc in RPCS if not rpc.user_id_field]
FAILED_AUTH = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}


@dataclass
class Keys:
    alice: str
    bob: str
    service: str
    expired: str
    revoked: str
    other_tenant_service: str


@dataclass
class AuthServer:
    proc: ServerProcess
    keys: Keys

    @property
    def web(self) -> str:
        return web_address(self.proc)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    data_dir = tmp_path_factory.mktemp("auth")
    expired = create_key(data_dir, "alice", "--expires-days", "0.00001")  # under a second
    made = time.monotonic()
    revoked = create_key(data_dir, "alice", "--name", "to revoke")
    assert keys_command(data_dir, "revoke", key_id(revoked)).returncode == 0
    keys = Keys(
        alice=create_key(data_dir, "alice"),
        bob=create_key(data_dir, "bob"),
        service=create_key(data_dir, "backend", "--service"),
        expired=expired,
        revoked=revoked,
        other_tenant_service=create_key(data_dir, "backend", "--service", "--tenant", "globex"),
    )
    time.sleep(max(0.0, 1.0 - (time.monotonic() - made)))
    proc = start_server(data_dir, "--auth", "api-key", "--web-port", "0", "--cors-origins", ORIGIN)
    yield AuthServer(proc, keys)
    assert proc.stop() == 0


def _unknown_key(keys: Keys) -> str:
    """Well formed, but no key has this id."""
    return f"ctxd_{'0' * 12}_{keys.alice.split('_', 2)[2]}"


def _wrong_secret(keys: Keys) -> str:
    """Alice's key id with another key's secret."""
    return f"ctxd_{key_id(keys.alice)}_{keys.bob.split('_', 2)[2]}"


# Each: a name and the call metadata, from the server's keys.
NO_CREDENTIAL = {
    "missing": lambda keys: [],
    "garbage": lambda keys: bearer("garbage"),
    "not bearer": lambda keys: [("authorization", f"Basic {keys.alice}")],
    "empty bearer": lambda keys: [("authorization", "Bearer ")],
    "unknown id": lambda keys: bearer(_unknown_key(keys)),
    "wrong secret": lambda keys: bearer(_wrong_secret(keys)),
    "expired": lambda keys: bearer(keys.expired),
    "revoked": lambda keys: bearer(keys.revoked),
}


def call_native(
    address: str, rpc: Rpc, request: Message, metadata: list[tuple[str, str]]
) -> tuple[grpc.StatusCode, str]:
    """The status of one call of ``rpc``, whichever its streaming kind."""
    code, details, _ = call_native_answers(address, rpc, request, metadata)
    return code, details


def call_native_answers(
    address: str, rpc: Rpc, request: Message, metadata: list[tuple[str, str]]
) -> tuple[grpc.StatusCode, str, list[bytes]]:
    """The status of one call of ``rpc`` and the serialized messages it answered."""
    path = "/" + rpc.path
    serialize, keep = (lambda m: m.SerializeToString()), (lambda b: b)
    method = rpc.method
    answers: list[bytes] = []
    with grpc.insecure_channel(address) as channel:
        try:
            if method.client_streaming and method.server_streaming:
                stream = channel.stream_stream(path, serialize, keep)(iter([request]), 10, metadata)
                answers.extend(stream)
            elif method.client_streaming:
                answers.append(
                    channel.stream_unary(path, serialize, keep)(iter([request]), 10, metadata)
                )
            elif method.server_streaming:
                answers.extend(channel.unary_stream(path, serialize, keep)(request, 10, metadata))
            else:
                answers.append(channel.unary_unary(path, serialize, keep)(request, 10, metadata))
        except grpc.RpcError as error:
            return error.code(), error.details() or "", answers
    return grpc.StatusCode.OK, "", answers


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def call_web(
    http: aiohttp.ClientSession,
    web: str,
    rpc: Rpc,
    request: Message,
    metadata: list[tuple[str, str]],
) -> tuple[grpc.StatusCode, str]:
    headers = {
        "Origin": ORIGIN,
        **{"Authorization" if k == "authorization" else k: v for k, v in metadata},
    }
    reply = await call(http, web, rpc.path, request, headers=headers)
    return reply.code, reply.message


# -- native port --------------------------------------------------------------------------


@pytest.mark.parametrize("case", NO_CREDENTIAL)
@pytest.mark.parametrize("rpc", RPCS, ids=str)
def test_native_without_a_usable_credential(server: AuthServer, rpc: Rpc, case: str) -> None:
    metadata = NO_CREDENTIAL[case](server.keys)
    code, message = call_native(server.proc.address, rpc, rpc.request("alice"), metadata)
    assert (code, message) == (grpc.StatusCode.UNAUTHENTICATED, GENERIC)


@pytest.mark.parametrize("rpc", WITH_USER, ids=str)
def test_native_another_users_key_is_denied(server: AuthServer, rpc: Rpc) -> None:
    code, _ = call_native(server.proc.address, rpc, rpc.request("alice"), bearer(server.keys.bob))
    assert code == grpc.StatusCode.PERMISSION_DENIED


@pytest.mark.parametrize("rpc", WITHOUT_USER, ids=str)
def test_native_rpcs_without_a_user_serve_any_key(server: AuthServer, rpc: Rpc) -> None:
    code, _ = call_native(server.proc.address, rpc, rpc.request(), bearer(server.keys.bob))
    assert code not in FAILED_AUTH


@pytest.mark.parametrize("user_id", ["", "alice"])
@pytest.mark.parametrize("rpc", WITH_USER, ids=str)
def test_native_own_key_with_own_or_empty_user(server: AuthServer, rpc: Rpc, user_id: str) -> None:
    code, _ = call_native(server.proc.address, rpc, rpc.request(user_id), bearer(server.keys.alice))
    assert code not in FAILED_AUTH


@pytest.mark.parametrize("rpc", WITH_USER, ids=str)
def test_native_service_key_acts_for_any_user(server: AuthServer, rpc: Rpc) -> None:
    code, _ = call_native(
        server.proc.address, rpc, rpc.request("alice"), bearer(server.keys.service)
    )
    assert code not in FAILED_AUTH


# -- another tenant's service key ---------------------------------------------------------

# Words only alice of the default tenant wrote: no other tenant's answer may contain them.
SECRET_QUESTION = "which zebra ate the marmalade"
SECRET_MEMORY = "alice keeps a zebra named marmalade"
OTHER_TENANT_GETS = {True: grpc.StatusCode.NOT_FOUND, False: grpc.StatusCode.OK}


@pytest.fixture
def alices(server: AuthServer) -> StoredIds:
    """A new session with messages and a new memory of alice, of the default tenant."""
    auth = bearer(server.keys.alice)
    with grpc.insecure_channel(server.proc.address) as channel:
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        session = sessions.CreateSession(sessions_pb2.CreateSessionRequest(), metadata=auth)
        appended = sessions.AppendMessages(
            sessions_pb2.AppendMessagesRequest(
                session_id=session.session.id,
                messages=[
                    {"role": 2, "content": f"{SECRET_QUESTION} {time.monotonic_ns()}"},
                    {"role": 3, "content": "the striped one"},
                ],
            ),
            metadata=auth,
        )
        memory = memory_pb2_grpc.MemoryServiceStub(channel).AddMemory(
            memory_pb2.AddMemoryRequest(content=f"{SECRET_MEMORY} {time.monotonic_ns()}"),
            metadata=auth,
        )
    return StoredIds(session.session.id, appended.messages[1].message.id, memory.memory.id)


@pytest.mark.parametrize("rpc", RPCS, ids=str)
def test_native_another_tenants_service_key_stays_in_its_tenant(
    server: AuthServer, alices: StoredIds, rpc: Rpc
) -> None:
    request, names_ids = with_ids(rpc, alices, "alice", "zebra marmalade")
    code, details, answers = call_native_answers(
        server.proc.address, rpc, request, bearer(server.keys.other_tenant_service)
    )
    if rpc.user_id_field:
        assert code == OTHER_TENANT_GETS[names_ids], details
    else:
        assert code not in FAILED_AUTH
    seen = b"".join(answers)
    for secret in (SECRET_QUESTION, SECRET_MEMORY, alices.session_id):
        assert secret.encode() not in seen
    # The same request with alice's own key reaches her resources (the ids are real).
    if names_ids:
        own, details = call_native(server.proc.address, rpc, request, bearer(server.keys.alice))
        assert own != grpc.StatusCode.NOT_FOUND, details


# -- web port -----------------------------------------------------------------------------


@pytest.mark.parametrize("rpc", RPCS, ids=str)
async def test_web_without_a_usable_credential(
    server: AuthServer, http: aiohttp.ClientSession, rpc: Rpc
) -> None:
    for case, metadata in NO_CREDENTIAL.items():
        got = await call_web(http, server.web, rpc, rpc.request("alice"), metadata(server.keys))
        assert got == (grpc.StatusCode.UNAUTHENTICATED, GENERIC), case


@pytest.mark.parametrize("rpc", WITH_USER, ids=str)
async def test_web_keys_act_as_their_user(
    server: AuthServer, http: aiohttp.ClientSession, rpc: Rpc
) -> None:
    keys = server.keys
    denied, _ = await call_web(http, server.web, rpc, rpc.request("alice"), bearer(keys.bob))
    assert denied == grpc.StatusCode.PERMISSION_DENIED
    for token, user_id in ((keys.alice, ""), (keys.alice, "alice"), (keys.service, "alice")):
        code, _ = await call_web(http, server.web, rpc, rpc.request(user_id), bearer(token))
        assert code not in FAILED_AUTH, (token, user_id)


@pytest.mark.parametrize("rpc", WITHOUT_USER, ids=str)
async def test_web_rpcs_without_a_user_serve_any_key(
    server: AuthServer, http: aiohttp.ClientSession, rpc: Rpc
) -> None:
    code, _ = await call_web(http, server.web, rpc, rpc.request(), bearer(server.keys.bob))
    assert code not in FAILED_AUTH


@pytest.mark.parametrize("rpc", RPCS, ids=str)
async def test_web_another_tenants_service_key_stays_in_its_tenant(
    server: AuthServer, http: aiohttp.ClientSession, alices: StoredIds, rpc: Rpc
) -> None:
    request, names_ids = with_ids(rpc, alices, "alice", "zebra marmalade")
    token = server.keys.other_tenant_service
    headers = {"Origin": ORIGIN, "Authorization": f"Bearer {token}"}
    reply = await call(http, server.web, rpc.path, request, headers=headers)
    if rpc.user_id_field:
        assert reply.code == OTHER_TENANT_GETS[names_ids], reply.message
    else:
        assert reply.code not in FAILED_AUTH
    seen = b"".join(reply.messages)
    for secret in (SECRET_QUESTION, SECRET_MEMORY, alices.session_id):
        assert secret.encode() not in seen


async def test_a_browser_preflight_allows_the_authorization_header(
    server: AuthServer, http: aiohttp.ClientSession
) -> None:
    headers = {
        "Origin": ORIGIN,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,x-grpc-web",
    }
    chat = "contextd.v1.ChatService/StreamChat"
    async with http.options(method_url(server.web, chat), headers=headers) as reply:
        assert reply.status == 204
        assert reply.headers["Access-Control-Allow-Origin"] == ORIGIN
        allowed = {h.strip() for h in reply.headers["Access-Control-Allow-Headers"].split(",")}
        assert "authorization" in allowed


# -- logs ---------------------------------------------------------------------------------


def test_call_logs_name_the_key_and_user_never_the_secret(server: AuthServer) -> None:
    rpc = next(rpc for rpc in RPCS if rpc.path.endswith("/ListSessions"))
    code, _ = call_native(server.proc.address, rpc, rpc.request(), bearer(server.keys.alice))
    assert code == grpc.StatusCode.OK
    deadline = time.monotonic() + 5
    wanted = {"method": "/" + rpc.path, "credential": key_id(server.keys.alice), "user": "alice"}
    while not any(wanted.items() <= line.items() for line in server.proc.logs("rpc")):
        assert time.monotonic() < deadline, "no log line names the key and user"
        time.sleep(0.05)
    secrets = [token.split("_", 2)[2] for token in vars(server.keys).values()]
    logged = repr(server.proc.log_lines)
    assert not [secret for secret in secrets if secret in logged]

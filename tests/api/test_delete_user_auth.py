"""DeleteUser under `--auth api-key`, on both ports: the user's own key or a service key
erases the user, keys included; another user's key is denied and erases nothing; the
erased user's keys are refused at once by the server that erased them, and within half
a second (the time a server keeps a key's row) by another sharing the database, as is a
key `contextd keys revoke` revoked beside a running server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import grpc
import grpc.aio
import pytest
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import memory_pb2_grpc, sessions_pb2_grpc, users_pb2_grpc
from contextd.v1 import sessions_pb2 as spb
from contextd.v1 import users_pb2 as upb

from tests.support.auth import bearer, create_key, key_id, keys_command
from tests.support.grpc_web import unary, web_address
from tests.support.server import ServerProcess, start_server

ORIGIN = "https://addin.example.com"


@dataclass
class Stubs:
    users: users_pb2_grpc.UserServiceStub
    sessions: sessions_pb2_grpc.SessionServiceStub
    memories: memory_pb2_grpc.MemoryServiceStub


def stubs_on(channel: grpc.aio.Channel) -> Stubs:
    return Stubs(
        users_pb2_grpc.UserServiceStub(channel),
        sessions_pb2_grpc.SessionServiceStub(channel),
        memory_pb2_grpc.MemoryServiceStub(channel),
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = start_server(tmp_path, "--auth", "api-key", "--web-port", "0", "--cors-origins", ORIGIN)
    yield proc
    assert proc.stop() == 0


@pytest.fixture
async def stubs(server: ServerProcess) -> AsyncIterator[Stubs]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield stubs_on(channel)


async def give_data(stubs: Stubs, key: str) -> str:
    """A session and a memory for the key's user; the session id."""
    created = await stubs.sessions.CreateSession(spb.CreateSessionRequest(), metadata=bearer(key))
    await stubs.memories.AddMemory(mpb.AddMemoryRequest(content="likes tea"), metadata=bearer(key))
    return str(created.session.id)


async def memories(stubs: Stubs, key: str) -> int:
    listed = await stubs.memories.ListMemories(mpb.ListMemoriesRequest(), metadata=bearer(key))
    return len(listed.memories)


async def code_of(call: object) -> grpc.StatusCode:
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


async def test_the_users_own_key_erases_the_user_and_its_keys(
    server: ServerProcess, stubs: Stubs
) -> None:
    alice = create_key(server.data_dir, "alice")
    second = create_key(server.data_dir, "alice", "--name", "laptop")
    bob = create_key(server.data_dir, "bob")
    await give_data(stubs, alice)
    await give_data(stubs, bob)
    assert await memories(stubs, second) == 1  # the server keeps both keys' rows now

    erased = await stubs.users.DeleteUser(
        upb.DeleteUserRequest(confirm_user_id="alice"), metadata=bearer(alice)
    )

    assert (erased.sessions, erased.memories, erased.api_keys) == (1, 1, 2)
    # At once, though the rows were kept: no call after DeleteUser answered gets in.
    for key in (alice, second):
        denied = stubs.memories.ListMemories(mpb.ListMemoriesRequest(), metadata=bearer(key))
        assert await code_of(denied) == grpc.StatusCode.UNAUTHENTICATED
    assert await memories(stubs, bob) == 1
    # A new key for the same user id finds nothing left.
    assert await memories(stubs, create_key(server.data_dir, "alice")) == 0


@pytest.mark.parametrize(
    "request_",
    [
        upb.DeleteUserRequest(user_id="alice", confirm_user_id="alice"),
        upb.DeleteUserRequest(user_id="alice"),
    ],
)
async def test_another_users_key_is_denied_and_erases_nothing(
    server: ServerProcess, stubs: Stubs, request_: upb.DeleteUserRequest
) -> None:
    alice = create_key(server.data_dir, "alice")
    bob = create_key(server.data_dir, "bob")
    await give_data(stubs, alice)
    denied = stubs.users.DeleteUser(request_, metadata=bearer(bob))
    assert await code_of(denied) == grpc.StatusCode.PERMISSION_DENIED
    assert await memories(stubs, alice) == 1


@pytest.mark.parametrize("confirm", ["", "bob", "ALICE"])
async def test_the_own_key_needs_the_confirmation(
    server: ServerProcess, stubs: Stubs, confirm: str
) -> None:
    alice = create_key(server.data_dir, "alice")
    await give_data(stubs, alice)
    refused = stubs.users.DeleteUser(
        upb.DeleteUserRequest(confirm_user_id=confirm), metadata=bearer(alice)
    )
    assert await code_of(refused) == grpc.StatusCode.INVALID_ARGUMENT
    assert await memories(stubs, alice) == 1


async def test_a_service_key_erases_a_user_over_the_web_port(
    server: ServerProcess, stubs: Stubs
) -> None:
    alice = create_key(server.data_dir, "alice")
    service = create_key(server.data_dir, "backend", "--service")
    await give_data(stubs, alice)
    headers = {"Origin": ORIGIN, "Authorization": f"Bearer {service}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        erased = await unary(
            http,
            web_address(server),
            "contextd.v1.UserService/DeleteUser",
            upb.DeleteUserRequest(user_id="alice", confirm_user_id="alice"),
            upb.DeleteUserResponse,
        )
        again = await unary(
            http,
            web_address(server),
            "contextd.v1.UserService/DeleteUser",
            upb.DeleteUserRequest(user_id="alice", confirm_user_id="alice"),
            upb.DeleteUserResponse,
        )
    assert (erased.sessions, erased.memories, erased.api_keys) == (1, 1, 1)
    assert again == upb.DeleteUserResponse()
    # The service key itself is the backend's, not alice's: it still works.
    listed = await stubs.memories.ListMemories(
        mpb.ListMemoriesRequest(user_id="alice"), metadata=bearer(service)
    )
    assert list(listed.memories) == []


KEY_ROW_TTL_S = 0.5  # api/api_key_auth.py: how long another process may use a kept row


async def refused_after(stubs: Stubs, key: str, since: float) -> float:
    """Seconds from ``since`` until a call with ``key`` is refused (at most 5)."""
    while True:
        call = stubs.memories.ListMemories(mpb.ListMemoriesRequest(), metadata=bearer(key))
        if await code_of(call) == grpc.StatusCode.UNAUTHENTICATED:
            return time.monotonic() - since
        assert time.monotonic() - since < 5, "the key still works"
        await asyncio.sleep(0.02)


async def test_a_key_revoked_beside_the_server_is_refused_within_the_bound(
    server: ServerProcess, stubs: Stubs
) -> None:
    key = create_key(server.data_dir, "carol")
    assert await memories(stubs, key) == 0  # its row is kept
    done = await asyncio.to_thread(keys_command, server.data_dir, "revoke", key_id(key))
    assert done.returncode == 0, done.stderr
    # The bound, and a margin for a call on a busy machine.
    assert await refused_after(stubs, key, time.monotonic()) < KEY_ROW_TTL_S + 0.5


async def test_a_replica_refuses_a_user_erased_on_another_within_the_bound(
    postgres_url: str, tmp_path: Path
) -> None:
    done = await asyncio.to_thread(
        keys_command, tmp_path, "create", "--user", "dora", "--database-url", postgres_url
    )
    assert done.returncode == 0, done.stderr
    key = done.stdout.strip()
    procs = [
        start_server(tmp_path / name, "--auth", "api-key", database_url=postgres_url)
        for name in ("a", "b")
    ]
    try:
        async with (
            grpc.aio.insecure_channel(procs[0].address) as first,
            grpc.aio.insecure_channel(procs[1].address) as second,
        ):
            on_a, on_b = stubs_on(first), stubs_on(second)
            assert await memories(on_b, key) == 0  # b keeps the key's row
            await on_a.users.DeleteUser(
                upb.DeleteUserRequest(confirm_user_id="dora"), metadata=bearer(key)
            )
            erased_at = time.monotonic()
            listed = on_a.memories.ListMemories(mpb.ListMemoriesRequest(), metadata=bearer(key))
            assert await code_of(listed) == grpc.StatusCode.UNAUTHENTICATED  # at once on a
            assert await refused_after(on_b, key, erased_at) < KEY_ROW_TTL_S + 0.5
    finally:
        for proc in procs:
            assert await asyncio.to_thread(proc.stop) == 0

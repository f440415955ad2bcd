"""delete_user in the Python SDK, sync and async: against the session's server, and with
API keys (an empty user id is the key's user, whose id the confirmation repeats)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd_client import AsyncContextClient, ContextClient

from tests.support.auth import bearer, create_key
from tests.support.sdk import expect_error
from tests.support.server import ServerProcess, start_server

COUNTS = {
    "sessions",
    "messages",
    "summaries",
    "memories",
    "memory_history",
    "event_logs",
    "api_keys",
}


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_delete_user_erases_and_is_idempotent(client: ContextClient) -> None:
    user = unique("erased")
    session = client.create_session(user)
    client.append_messages(
        user,
        session["id"],
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
    )
    client.add_memory(user, "likes tea")

    counts = client.delete_user(user)

    assert counts == {**dict.fromkeys(COUNTS, 0), "sessions": 1, "messages": 2, "memories": 1}
    assert client.list_sessions(user) == [] and client.list_memories(user) == []
    assert client.delete_user(user) == dict.fromkeys(COUNTS, 0)


def test_delete_user_refuses_a_confirmation_of_another_user(client: ContextClient) -> None:
    user = unique("kept")
    client.add_memory(user, "likes coffee")
    error = expect_error(lambda: client.delete_user(user, confirm_user_id="someone-else"))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.fields == ["confirm_user_id"]
    assert len(client.list_memories(user)) == 1


async def test_async_delete_user(aclient: AsyncContextClient) -> None:
    user = unique("erased-async")
    await aclient.add_memory(user, "likes tea")
    assert (await aclient.delete_user(user))["memories"] == 1
    assert await aclient.delete_user(user) == dict.fromkeys(COUNTS, 0)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    data_dir = tmp_path_factory.mktemp("keyed")
    proc = start_server(data_dir, "--auth", "api-key")
    yield proc, data_dir
    assert proc.stop() == 0


def test_with_a_key_an_empty_user_id_is_the_keys_user(
    keyed: tuple[ServerProcess, Path],
) -> None:
    proc, data_dir = keyed
    key = create_key(data_dir, "carol")
    with ContextClient(proc.address, metadata=bearer(key)) as client:
        client.add_memory("", "carol likes tea")
        refused = expect_error(lambda: client.delete_user(""))
        assert refused.code == grpc.StatusCode.INVALID_ARGUMENT  # no confirmation
        counts = client.delete_user("", confirm_user_id="carol")
        assert counts["memories"] == 1 and counts["api_keys"] == 1


async def test_async_with_a_service_key(keyed: tuple[ServerProcess, Path]) -> None:
    proc, data_dir = keyed
    dave = create_key(data_dir, "dave")
    service = create_key(data_dir, "backend", "--service")
    async with AsyncContextClient(proc.address, metadata=bearer(dave)) as as_dave:
        await as_dave.add_memory("", "dave likes tea")
    async with AsyncContextClient(proc.address, metadata=bearer(service)) as backend:
        counts = await backend.delete_user("dave")
    assert counts["memories"] == 1 and counts["api_keys"] == 1

"""``contextd mcp --stdio`` started by the SDK's own stdio client, as a desktop app
starts it: the key from CONTEXTD_API_KEY (or the user from CONTEXTD_USER with --auth
none); a refused key ends the process before it serves."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mcp import Client, MCPError, StdioServerParameters

from tests.mcp_server.conftest import MODES, call, memories, refused
from tests.support.keyed_server import UNKNOWN_KEY, KeyedServer
from tests.support.server import ServerProcess


def stdio(address: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "contextd", "mcp", "--stdio", "--address", address],
        env=env,
    )


async def test_a_key_from_the_environment_acts_as_its_user(keyed: KeyedServer) -> None:
    async with Client(stdio(keyed.address, CONTEXTD_API_KEY=keyed.alice)) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert {"search_memories", "add_memory", "build_context", "read_session"} <= tools
        await call(client, "add_memory", content="Alice prefers window seats.")
        found = await call(client, "search_memories", query="window seats")
        assert [m["content"] for m in found["memories"]] == ["Alice prefers window seats."]
        assert (await call(client, "list_sessions"))["sessions"] == []
    assert "Alice prefers window seats." in memories(keyed.address, key=keyed.alice)
    assert memories(keyed.address, key=keyed.bob) == []


async def test_another_users_memory_is_out_of_reach(keyed: KeyedServer) -> None:
    async with Client(stdio(keyed.address, CONTEXTD_API_KEY=keyed.bob)) as bob:
        added = await call(bob, "add_memory", content="Bob keeps a diary.")
    async with Client(stdio(keyed.address, CONTEXTD_API_KEY=keyed.alice)) as alice:
        error = await refused(alice, "delete_memory", memory_id=added["memory"]["id"])
        assert "NOT_FOUND" in error  # as if it did not exist
        assert (await call(alice, "search_memories", query="diary"))["memories"] == []
    assert memories(keyed.address, key=keyed.bob) == ["Bob keeps a diary."]


@pytest.mark.parametrize("key", [UNKNOWN_KEY, ""], ids=["unknown", "missing"])
def test_a_refused_key_ends_the_process_before_it_serves(keyed: KeyedServer, key: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "contextd", "mcp", "--stdio", "--address", keyed.address],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env={"CONTEXTD_API_KEY": key, "PATH": ""},
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""  # the protocol's channel stays clean
    assert "UNAUTHENTICATED" in done.stderr and "CONTEXTD_API_KEY" in done.stderr


async def test_the_sdk_client_sees_the_refusal(keyed: KeyedServer) -> None:
    with pytest.raises((MCPError, BaseExceptionGroup, OSError)):
        async with Client(stdio(keyed.address, CONTEXTD_API_KEY=UNKNOWN_KEY)) as client:
            await client.list_tools()


@pytest.mark.parametrize("mode", MODES)
async def test_with_auth_none_the_user_comes_from_the_environment(
    open_server: ServerProcess, mode: str
) -> None:
    user = f"gil-{mode}"
    async with Client(stdio(open_server.address, CONTEXTD_USER=user), mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
        await call(client, "add_memory", content="Gil runs on Sundays.")
    assert memories(open_server.address, user) == ["Gil runs on Sundays."]


async def test_without_a_user_the_error_names_the_variable(open_server: ServerProcess) -> None:
    async with Client(stdio(open_server.address)) as client:
        error = await refused(client, "list_sessions")
    assert "INVALID_ARGUMENT: CONTEXTD_USER: required" in error


def test_mcp_without_a_transport_says_which_to_give() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "contextd", "mcp"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "--stdio" in done.stderr

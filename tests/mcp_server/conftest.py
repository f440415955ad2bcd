"""Fixtures of the MCP tests: a contextd with the MCP port on, with --auth none and
with --auth api-key (keys of alice and bob), and the SDK's own client over streamable
HTTP with the headers a host configures."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import pytest
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import memory_pb2_grpc
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.support.keyed_server import KeyedServer, keyed_server
from tests.support.server import ServerProcess, start_server


def mcp_url(proc: ServerProcess) -> str:
    """From the ``mcp listening`` log line (logged before ``listening``)."""
    [line] = proc.logs("mcp listening")
    return f"http://{line['address']}{line['path']}"


# The protocol generations the SDK's client speaks: the stateless 2026-07-28 form, and
# the initialize handshake (it offers 2025-11-25, the newest of them).
MODES = ("2026-07-28", "legacy")


@asynccontextmanager
async def connect(url: str, mode: str = "auto", **headers: str) -> AsyncIterator[Client]:
    """The SDK's client; ``auto`` (its default) finds the newest version the server
    serves."""
    http = create_mcp_http_client(headers=headers)
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, mode=mode) as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's structured result; fails on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    """The text of a tool error."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


def memories(address: str, user: str = "", key: str = "") -> list[str]:
    """The user's memories' texts, read on the native port."""
    metadata = (("authorization", f"Bearer {key}"),) if key else ()
    with grpc.insecure_channel(address) as channel:
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        reply = stub.ListMemories(
            mpb.ListMemoriesRequest(user_id=user, page_size=200), metadata=metadata
        )
    return [m.content for m in reply.memories]


def history(address: str, user: str, memory_id: str) -> list[tuple[str, str, bool]]:
    """The memory's text changes, newest first, read on the native port: (old, new,
    whether the old text stays a superseded fact)."""
    with grpc.insecure_channel(address) as channel:
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        reply = stub.ListMemoryHistory(
            mpb.ListMemoryHistoryRequest(user_id=user, memory_id=memory_id)
        )
    return [(c.old_content, c.new_content, bool(c.replaced_memory_id)) for c in reply.changes]


# One server for every file of the package (each test names users of its own).
@pytest.fixture(scope="package")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(tmp_path_factory.mktemp("mcp"), "--mcp-port", "0")
    yield proc
    assert proc.stop() == 0
    assert not [e for e in proc.log_lines if e.get("level") == "ERROR"]


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyedServer]:
    with keyed_server(tmp_path_factory.mktemp("mcp-keyed"), "--mcp-port", "0") as server:
        yield server

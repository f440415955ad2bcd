"""The MCP port under --auth api-key: a bearer the native server accepts is required
(401 with WWW-Authenticate naming the protected resource metadata otherwise), the
metadata is readable without one, every tool acts as the key's user, and an MCP
session belongs to the credential that opened it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from mcp import MCPError

from tests.mcp_server.conftest import call, connect, mcp_url, memories, refused
from tests.support.keyed_server import UNKNOWN_KEY, KeyedServer

INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize(
    "headers",
    [{}, bearer(UNKNOWN_KEY), bearer("garbage"), {"Authorization": "Basic YTpi"}],
    ids=["none", "unknown key", "garbage", "basic"],
)
def test_a_refused_credential_is_401(keyed: KeyedServer, headers: dict[str, str]) -> None:
    response = httpx.post(
        mcp_url(keyed.proc), json=INITIALIZE, headers={**ACCEPT, **headers}, timeout=30
    )
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token"')
    origin = mcp_url(keyed.proc).removesuffix("/mcp")
    assert f'resource_metadata="{origin}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert response.json()["error"] == "invalid_token"


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]
)
def test_the_resource_metadata_is_read_without_a_key(keyed: KeyedServer, path: str) -> None:
    url = mcp_url(keyed.proc)
    document = httpx.get(url.removesuffix("/mcp") + path, timeout=30)
    assert document.status_code == 200
    assert document.json() == {
        "resource": url,
        "resource_name": "contextd",
        "bearer_methods_supported": ["header"],
        "contextd_credential": "api-key",
        "contextd_credential_description": "an API key made with `contextd keys create`, "
        "sent as a bearer token; no authorization server issues them",
    }
    assert "authorization_servers" not in document.json()
    posted = httpx.post(url.removesuffix("/mcp") + path, timeout=30)
    assert posted.status_code == 405


def test_the_metadata_names_the_host_it_was_asked_at(keyed: KeyedServer) -> None:
    origin = mcp_url(keyed.proc).removesuffix("/mcp")
    named = httpx.get(
        origin + "/.well-known/oauth-protected-resource",
        headers={"Host": "mcp.example.com"},
        timeout=30,
    )
    assert named.json()["resource"] == "http://mcp.example.com/mcp"
    # A Host header that is not one: the port's own address.
    odd = httpx.get(
        origin + "/.well-known/oauth-protected-resource",
        headers={"Host": 'x" onload="y'},
        timeout=30,
    )
    assert odd.json()["resource"] == origin + "/mcp"


async def test_the_sdk_client_cannot_connect_with_a_refused_key(keyed: KeyedServer) -> None:
    with pytest.raises(BaseExceptionGroup) as failed:
        async with connect(mcp_url(keyed.proc), **bearer(UNKNOWN_KEY)) as client:
            await client.call_tool("add_memory", {"content": "never stored"})
    # The SDK answers the 401 to its initialize request with an MCPError of its own.
    assert failed.group_contains(MCPError, depth=2)
    assert "never stored" not in memories(keyed.address, key=keyed.alice)


async def test_a_key_acts_as_its_user_and_no_other(keyed: KeyedServer) -> None:
    async with connect(mcp_url(keyed.proc), **bearer(keyed.alice)) as alice:
        memory = (await call(alice, "add_memory", content="Alice flies on Friday."))["memory"]
        session = (await call(alice, "create_session", title="Trip"))["session"]
    assert memories(keyed.address, key=keyed.alice) == ["Alice flies on Friday."]
    # Naming another user: only a service key may.
    async with connect(
        mcp_url(keyed.proc), **bearer(keyed.alice), **{"X-Contextd-User": "bob"}
    ) as as_bob:
        assert "PERMISSION_DENIED" in await refused(as_bob, "add_memory", content="I am Bob.")
    async with connect(mcp_url(keyed.proc), **bearer(keyed.bob)) as bob:
        assert (await call(bob, "search_memories", query="Friday"))["memories"] == []
        assert (await call(bob, "list_sessions"))["sessions"] == []
        # Alice's ids are unknown to Bob, as if they did not exist.
        assert "NOT_FOUND" in await refused(bob, "delete_memory", memory_id=memory["id"])
        assert "NOT_FOUND" in await refused(bob, "read_session", session_id=session["id"])
        with pytest.raises(Exception, match="NOT_FOUND"):
            await bob.read_resource(f"contextd://sessions/{session['id']}/messages")
    assert memories(keyed.address, key=keyed.alice) == ["Alice flies on Friday."]
    assert memories(keyed.address, key=keyed.bob) == []


def test_an_mcp_session_belongs_to_the_key_that_opened_it(keyed: KeyedServer) -> None:
    url = mcp_url(keyed.proc)
    with httpx.Client(timeout=30) as http:
        opened = http.post(url, json=INITIALIZE, headers={**ACCEPT, **bearer(keyed.alice)})
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        headers = {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        stolen = http.post(url, json=listing, headers={**headers, **bearer(keyed.bob)})
        assert stolen.status_code in (403, 404)
        assert "search_memories" not in stolen.text

"""The MCP tools and resources over streamable HTTP, with the SDK's own client, on a
server with --auth none (the user named by the X-Contextd-User header)."""

from __future__ import annotations

import json

import grpc
import httpx
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb
from contextd.v1 import sessions_pb2_grpc

from tests.mcp_server.conftest import call, connect, history, mcp_url, memories, refused
from tests.support.server import ServerProcess

TOOLS = {
    "search_memories",
    "list_memories",
    "add_memory",
    "update_memory",
    "delete_memory",
    "create_session",
    "list_sessions",
    "read_session",
    "build_context",
}


def append(proc: ServerProcess, user: str, session_id: str, *texts: str) -> None:
    """Messages stored in a session, user and assistant in turn (on the native port)."""
    roles = [pb.ROLE_USER, pb.ROLE_ASSISTANT]
    with grpc.insecure_channel(proc.address) as channel:
        sessions_pb2_grpc.SessionServiceStub(channel).AppendMessages(
            spb.AppendMessagesRequest(
                user_id=user,
                session_id=session_id,
                messages=[pb.Message(role=roles[k % 2], content=t) for k, t in enumerate(texts)],
            )
        )


async def test_the_tools_and_the_resource_template_are_listed(open_server: ServerProcess) -> None:
    async with connect(mcp_url(open_server), **{"X-Contextd-User": "ann"}) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        templates = (await client.list_resource_templates()).resource_templates
    assert set(tools) == TOOLS
    assert tools["build_context"].input_schema["required"] == ["question", "session_id"]
    assert [t.uri_template for t in templates] == ["contextd://sessions/{session_id}/messages"]


async def test_memories_are_added_found_updated_and_deleted(open_server: ServerProcess) -> None:
    async with connect(mcp_url(open_server), **{"X-Contextd-User": "ann"}) as client:
        added = await call(client, "add_memory", content="Ann drinks green tea.")
        assert added["created"] is True
        first = added["memory"]["id"]
        again = await call(client, "add_memory", content="ann drinks green  TEA.")
        assert (again["created"], again["memory"]["id"]) == (False, first)
        found = await call(client, "search_memories", query="tea")
        assert [m["id"] for m in found["memories"]] == [first]
        updated = await call(
            client, "update_memory", memory_id=first, content="Ann drinks coffee.", supersede=True
        )
        assert updated["memory"]["id"] == first  # the same memory, its new text
        assert memories(open_server.address, "ann") == ["Ann drinks coffee."]
        listed = await call(client, "list_memories")
        assert [m["content"] for m in listed["memories"]] == ["Ann drinks coffee."]
        assert history(open_server.address, "ann", first) == [
            ("Ann drinks green tea.", "Ann drinks coffee.", True)
        ]
        fixed = await call(client, "update_memory", memory_id=first, content="Ann drinks cofee!")
        assert (fixed["memory"]["id"], fixed["memory"]["content"]) == (first, "Ann drinks cofee!")
        assert history(open_server.address, "ann", first)[0] == (
            "Ann drinks coffee.",
            "Ann drinks cofee!",
            False,  # a correction: no fact of the past
        )
        deleted = await call(client, "delete_memory", memory_id=updated["memory"]["id"])
        assert deleted == {"deleted": updated["memory"]["id"]}
        assert (await call(client, "search_memories", query="coffee"))["memories"] == []
    assert memories(open_server.address, "ann") == []


async def test_an_update_of_an_unknown_memory_stores_nothing(open_server: ServerProcess) -> None:
    async with connect(mcp_url(open_server), **{"X-Contextd-User": "cid"}) as client:
        error = await refused(client, "update_memory", memory_id="987654", content="New text.")
    assert "NOT_FOUND" in error
    assert memories(open_server.address, "cid") == []


async def test_sessions_are_listed_read_and_built_from(open_server: ServerProcess) -> None:
    async with connect(mcp_url(open_server), **{"X-Contextd-User": "dee"}) as client:
        await call(client, "add_memory", content="Dee is allergic to peanuts.")
        session = (await call(client, "create_session", title="Dinner"))["session"]
        append(open_server, "dee", session["id"], "Plan a dinner.", "Sure: what do you like?")
        listed = await call(client, "list_sessions")
        assert [s["id"] for s in listed["sessions"]] == [session["id"]]
        assert listed["sessions"][0]["message_count"] == 2
        read = await call(client, "read_session", session_id=session["id"])
        assert [(m["role"], m["content"]) for m in read["messages"]] == [
            ("user", "Plan a dinner."),
            ("assistant", "Sure: what do you like?"),
        ]
        built = await call(
            client,
            "build_context",
            question="Can I have peanuts?",
            session_id=session["id"],
            output_format="openai",
        )
        resource = await client.read_resource(f"contextd://sessions/{session['id']}/messages")
    messages = built["messages"]
    assert messages[0]["role"] == "system" and "peanuts" in messages[0]["content"]
    assert (messages[-1]["role"], messages[-1]["content"]) == ("user", "Can I have peanuts?")
    assert [m["content"] for m in messages[1:-1]] == ["Plan a dinner.", "Sure: what do you like?"]
    layers = {layer["name"]: layer for layer in built["report"]["context_layers"]}
    assert layers["memory"]["included"] and layers["memory"]["items_kept"] == 1
    assert built["payload"]["messages"][-1]["content"] == "Can I have peanuts?"
    body = json.loads(resource.contents[0].text)  # type: ignore[union-attr]
    assert body["complete"] is True
    assert [m["content"] for m in body["messages"]] == ["Plan a dinner.", "Sure: what do you like?"]
    # build_context stored nothing: the session still has its two messages.
    async with connect(mcp_url(open_server), **{"X-Contextd-User": "dee"}) as client:
        assert len((await call(client, "read_session", session_id=session["id"]))["messages"]) == 2


async def test_another_users_data_is_refused(open_server: ServerProcess) -> None:
    async with connect(mcp_url(open_server), **{"X-Contextd-User": "eve"}) as eve:
        memory = (await call(eve, "add_memory", content="Eve's secret."))["memory"]
        session = (await call(eve, "create_session", title="Eve's"))["session"]
    async with connect(mcp_url(open_server), **{"X-Contextd-User": "finn"}) as finn:
        # Eve's ids are unknown to Finn, as if they did not exist.
        assert "NOT_FOUND" in await refused(finn, "delete_memory", memory_id=memory["id"])
        assert "NOT_FOUND" in await refused(
            finn, "update_memory", memory_id=memory["id"], content="Finn's now."
        )
        assert "NOT_FOUND" in await refused(finn, "read_session", session_id=session["id"])
        assert "NOT_FOUND" in await refused(
            finn, "build_context", question="?", session_id=session["id"]
        )
        assert (await call(finn, "search_memories", query="secret"))["memories"] == []
        assert (await call(finn, "list_sessions"))["sessions"] == []
    assert memories(open_server.address, "eve") == ["Eve's secret."]
    assert memories(open_server.address, "finn") == []


async def test_without_a_user_the_tools_name_the_header_to_set(open_server: ServerProcess) -> None:
    async with connect(mcp_url(open_server)) as client:
        error = await refused(client, "add_memory", content="whose?")
    assert "INVALID_ARGUMENT: the X-Contextd-User header: required" in error
    assert "user_id" not in error


async def test_a_refusal_quotes_no_unbounded_input(open_server: ServerProcess) -> None:
    async with connect(mcp_url(open_server), **{"X-Contextd-User": "hal"}) as client:
        error = await refused(client, "read_session", session_id="9" * 20 + "x" * 5000)
    assert error.startswith("Error executing tool read_session: INVALID_ARGUMENT: session_id")
    assert len(error) < 400


def test_without_credentials_there_is_no_resource_metadata(open_server: ServerProcess) -> None:
    origin = mcp_url(open_server).removesuffix("/mcp")
    assert httpx.get(origin + "/.well-known/oauth-protected-resource").status_code == 404

"""What a model and its host choose tools by, in both protocol generations: every tool
has a title and all four hints, a description without the source's indentation, and an
output schema that says what comes back (no open object), which its results match; the
lists may be cached for the 2026-07-28 form; the prompt lists what is remembered."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import pytest
from mcp_types import Tool

from tests.mcp_server.conftest import MODES, call, connect, mcp_url
from tests.support.server import ServerProcess

HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
READ_ONLY = {"search_memories", "list_memories", "list_sessions", "read_session", "build_context"}
DESTRUCTIVE = {"update_memory", "delete_memory"}
# build_context's payload is another API's request body: its messages and their blocks
# keep that API's members (the places are named by their definitions).
THIRD_PARTY = {"/PayloadMessage", "/PayloadMessage/content/items", "/Payload/system/items"}


def open_objects(schema: Any, where: str = "") -> list[str]:
    """The places of a JSON schema where an object says nothing of its properties, or
    a value has no type."""
    found: list[str] = []
    if isinstance(schema, dict):
        if "$ref" not in schema and "anyOf" not in schema and "type" not in schema:
            found.append(where or "/")
        if schema.get("type") == "object":
            named = schema.get("properties") or schema.get("additionalProperties") is not None
            if not named or schema.get("additionalProperties") is True:
                found.append(where or "/")
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                for name, sub in value.items():
                    found += open_objects(sub, f"{where}/{name}")
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                found += open_objects(value, f"{where}/{key}")
            elif key == "anyOf":
                for sub in value:
                    found += open_objects(sub, where)
    return found


def check_tool(tool: Tool) -> None:
    """Fails for a tool a model would pick blind."""
    hints = tool.annotations.model_dump(by_alias=True) if tool.annotations else {}
    assert tool.title and hints.get("title") == tool.title, tool.name
    assert all(isinstance(hints.get(h), bool) for h in HINTS), (tool.name, hints)
    assert hints["readOnlyHint"] is (tool.name in READ_ONLY), tool.name
    assert hints["destructiveHint"] is (tool.name in DESTRUCTIVE), tool.name
    assert hints["openWorldHint"] is False
    assert tool.description and not any(
        line != line.lstrip() for line in tool.description.splitlines()
    ), tool.name
    schema = tool.output_schema
    assert schema is not None and schema.get("type") == "object", tool.name
    assert schema.get("properties") and schema.get("required"), tool.name
    assert set(open_objects(schema)) <= THIRD_PARTY, (tool.name, open_objects(schema))
    jsonschema.Draft202012Validator.check_schema(schema)


def test_the_check_fails_for_a_tool_without_hints_or_a_specific_schema() -> None:
    bare = Tool(name="t", input_schema={"type": "object"}, description="Does.")
    with pytest.raises(AssertionError):
        check_tool(bare)
    generic = {"type": "object", "additionalProperties": True}
    assert open_objects(generic) == ["/"]
    assert open_objects({"type": "object", "properties": {"x": {}}}) == ["/x"]


@pytest.mark.parametrize("mode", MODES)
async def test_every_tool_guides_the_model(open_server: ServerProcess, mode: str) -> None:
    async with connect(mcp_url(open_server), mode, **{"X-Contextd-User": f"ida-{mode}"}) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
        tools = (await client.list_tools()).tools
        schemas = {tool.name: tool.output_schema for tool in tools}
        for tool in tools:
            check_tool(tool)
        session = await call(client, "create_session", title="Hints")
        results = {
            "create_session": session,
            "add_memory": await call(client, "add_memory", content="Ida hikes."),
            "search_memories": await call(client, "search_memories", query="hikes"),
            "list_memories": await call(client, "list_memories"),
            "list_sessions": await call(client, "list_sessions"),
            "read_session": await call(client, "read_session", session_id=session["session"]["id"]),
            "build_context": await call(
                client,
                "build_context",
                question="Hike?",
                session_id=session["session"]["id"],
                output_format="anthropic",
            ),
        }
        memory_id = results["add_memory"]["memory"]["id"]
        results["update_memory"] = await call(
            client, "update_memory", memory_id=memory_id, content="Ida climbs."
        )
        results["delete_memory"] = await call(client, "delete_memory", memory_id=memory_id)
    assert set(results) == set(schemas)
    for name, result in results.items():
        jsonschema.validate(result, schemas[name])


async def test_the_lists_may_be_cached_in_the_stateless_form(open_server: ServerProcess) -> None:
    async with connect(mcp_url(open_server), "2026-07-28") as client:
        listed = [
            await client.list_tools(cache_mode="bypass"),
            await client.list_prompts(cache_mode="bypass"),
            await client.list_resource_templates(cache_mode="bypass"),
        ]
    for result in listed:
        assert (result.ttl_ms, result.cache_scope) == (3_600_000, "public")
    # What a host shows of the prompt and the template, without the source's indentation.
    [prompt], [template] = listed[1].prompts, listed[2].resource_templates
    for description in (prompt.description, template.description):
        assert description and "\n" not in description


@pytest.mark.parametrize("mode", MODES)
async def test_the_prompt_lists_what_is_remembered(open_server: ServerProcess, mode: str) -> None:
    async with connect(mcp_url(open_server), mode, **{"X-Contextd-User": f"jo-{mode}"}) as client:
        [prompt] = (await client.list_prompts()).prompts
        assert (prompt.name, prompt.title) == (
            "what_do_you_remember",
            "What do you remember about me?",
        )
        empty = await client.get_prompt("what_do_you_remember", {})
        await call(client, "add_memory", content="Jo keeps bees.")
        await call(client, "add_memory", content="Jo lives in Lyon.")
        everything = await client.get_prompt("what_do_you_remember", {})
        bees = await client.get_prompt("what_do_you_remember", {"topic": "bees"})
    text = [r.messages[0].content.text for r in (empty, everything, bees)]  # type: ignore[union-attr]
    assert "no memories" in text[0]
    assert "- Jo keeps bees." in text[1] and "- Jo lives in Lyon." in text[1]
    assert "- Jo keeps bees." in text[2] and "Lyon" not in text[2]


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_each_handshake_version_is_negotiated(open_server: ServerProcess, version: str) -> None:
    """The versions hosts still send: the initialize handshake answers with the same,
    and a tool call in that session gets its result."""
    headers = {"Accept": "application/json, text/event-stream", "X-Contextd-User": "ola"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    with httpx.Client(timeout=30) as http:
        opened = http.post(mcp_url(open_server), json=initialize, headers=headers)
        assert opened.status_code == 200
        assert sse_result(opened.text)["protocolVersion"] == version
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        session["mcp-protocol-version"] = version
        notified = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        http.post(mcp_url(open_server), json=notified, headers={**headers, **session})
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        listing["params"] = {"name": "list_sessions", "arguments": {}}
        called = http.post(mcp_url(open_server), json=listing, headers={**headers, **session})
    assert sse_result(called.text)["structuredContent"] == {"sessions": [], "next_page_token": ""}


def sse_result(text: str) -> Any:
    """The result of the JSON-RPC answer in a server-sent event stream."""
    [data] = [
        line[5:] for line in text.splitlines() if line.startswith("data:") and line[5:].strip()
    ]
    return json.loads(data)["result"]

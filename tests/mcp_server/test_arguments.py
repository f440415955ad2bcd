"""The memory tools' scope, metadata, filter and as-of, as the RPCs take them; refused
arguments told in plain words naming each argument (never the validator's text nor the
value sent); a resource that is not there answered as the protocol version says."""

from __future__ import annotations

import pytest
from mcp import MCPError

from tests.mcp_server.conftest import MODES, call, connect, mcp_url, refused
from tests.support.server import ServerProcess

VALIDATOR_WORDS = ("validation error", "pydantic", "type=", "input_value", "Field required")


@pytest.mark.parametrize(
    ("tool", "arguments", "clauses"),
    [
        ("search_memories", {}, ["query is required"]),
        ("search_memories", {"query": "x", "limit": "many"}, ["limit must be a whole number"]),
        ("search_memories", {"query": "x", "limit": 1000}, ["limit must be at most 100"]),
        ("list_memories", {"page_size": 0}, ["page_size must be at least 1"]),
        (
            "search_memories",
            {"query": ["x"], "filter": {"as_of": "last week", "colour": "red"}},
            [
                "filter.as_of must be a time in RFC 3339, e.g. 2026-05-01T09:00:00Z",
                "filter.colour is not an argument here",
                "query must be text",
            ],
        ),
        ("add_memory", {"content": "x", "scope": "word"}, ["scope must be an object"]),
        (
            "list_memories",
            {"filter": {"k" * 5000: 1, "\u202e": 2, "metadata": {"a": 1}}},
            [
                "filter.'\\u202e' is not an argument here",
                "filter.'" + "k" * 40 + "'…(+4960 chars) is not an argument here",
                "filter.metadata.a must be text",
            ],
        ),
        (
            "add_memory",
            {"content": "x", "metadata": {f"k{i}": "v" for i in range(17)}},
            ["metadata is too long (at most 16)"],
        ),
        (
            "update_memory",
            {"memory_id": "1", "supersede": "maybe"},
            ["supersede must be true or false"],
        ),
        (
            "build_context",
            {"question": "?", "session_id": "1", "output_format": "xml"},
            ["output_format must be one of 'neutral', 'openai' or 'anthropic'"],
        ),
    ],
)
async def test_refused_arguments_are_told_in_plain_words(
    open_server: ServerProcess, tool: str, arguments: dict[str, object], clauses: list[str]
) -> None:
    async with connect(mcp_url(open_server), **{"X-Contextd-User": "kim"}) as client:
        error = await refused(client, tool, **arguments)
    assert error == f"Invalid arguments to {tool}: " + "; ".join(clauses) + "."
    assert not any(word in error for word in VALIDATOR_WORDS)


async def test_an_update_without_a_change_says_what_to_give(open_server: ServerProcess) -> None:
    async with connect(mcp_url(open_server), **{"X-Contextd-User": "kim"}) as client:
        error = await refused(client, "update_memory", memory_id="1")
    assert error.endswith(
        "nothing to change: give one of content, scope, metadata, valid_from, valid_to, expire_time"
    )


async def test_memories_take_scope_metadata_and_times(open_server: ServerProcess) -> None:
    async with connect(mcp_url(open_server), **{"X-Contextd-User": "lea"}) as client:
        word = await call(
            client,
            "add_memory",
            content="Lea writes in British English.",
            scope={"app": "word"},
            metadata={"source": "settings"},
            expire_time="2099-01-01T00:00:00Z",
        )
        await call(client, "add_memory", content="Lea writes formulas in English.")
        memory = word["memory"]
        assert (memory["scope"], memory["metadata"]) == (
            {"agent": "", "app": "word"},
            {"source": "settings"},
        )
        assert memory["expire_time"] == "2099-01-01T00:00:00Z"
        in_word = await call(client, "search_memories", query="writes", filter={"app": "word"})
        assert [m["id"] for m in in_word["memories"]] == [memory["id"]]
        labelled = await call(client, "list_memories", filter={"metadata": {"source": "settings"}})
        assert [m["id"] for m in labelled["memories"]] == [memory["id"]]
        # A fact that changed: as of before the change, the old text is what was true.
        before = (await call(client, "list_memories"))["memories"][0]["create_time"]
        await call(
            client,
            "update_memory",
            memory_id=memory["id"],
            content="Lea writes in American English.",
            supersede=True,
            metadata={"source": "asked"},
        )
        ended = await call(
            client, "update_memory", memory_id=memory["id"], valid_to="2098-01-01T00:00:00Z"
        )
        assert ended["memory"]["valid_to"] == "2098-01-01T00:00:00Z"
        now = await call(client, "search_memories", query="English writes", filter={"app": "word"})
        assert [m["content"] for m in now["memories"]] == ["Lea writes in American English."]
        assert now["memories"][0]["metadata"] == {"source": "asked"}
        then = await call(
            client,
            "search_memories",
            query="English writes",
            filter={"app": "word", "as_of": before},
        )
        assert [m["content"] for m in then["memories"]] == ["Lea writes in British English."]
        assert then["memories"][0]["superseded_by"] == memory["id"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_resource_not_there_is_not_found(open_server: ServerProcess, mode: str) -> None:
    """-32002 in the handshake versions; -32602 from 2026-07-28, where the specification
    moved it; the error names the URI."""
    code = -32002 if mode == "legacy" else -32602
    async with connect(mcp_url(open_server), mode, **{"X-Contextd-User": "max"}) as client:
        for uri in ("contextd://sessions/424242/messages", "contextd://elsewhere"):
            with pytest.raises(MCPError) as failed:
                await client.read_resource(uri)
            assert (failed.value.error.code, failed.value.error.data) == (code, {"uri": uri})
        with pytest.raises(MCPError) as failed:
            await client.read_resource("contextd://sessions/" + "s" * 5000 + "/messages")
        assert failed.value.error.code == -32602  # a session id that cannot be one
        assert len(str(failed.value.error.data)) < 300

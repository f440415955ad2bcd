"""Every field of every request message, nested ones included, is reachable from some
argument of both Python clients (StreamChat's fields: test_python_request_fields.py)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from contextd_client import (
    AsyncContextClient,
    ContextClient,
    cpb,
    image_part,
    mpb,
    pb,
    ppb,
    spb,
    upb,
)

from tests.support.images import png
from tests.support.proto_paths import field_paths, set_paths
from tests.support.recording_server import SERVICES, RecordingServer, recording_server

# Fields no argument sets, and why.
EXEMPT: dict[str, dict[str, str]] = {
    "BuildMessages": {"history.tokens": "filled in by the server"},
    "CountTokens": {"messages.tokens": "filled in by the server"},
    "AppendMessages": {"messages.tokens": "filled in by the server"},
    # UpdateMemory's memory carries the changed fields only; these the server keeps.
    "UpdateMemory": dict.fromkeys(
        (
            "memory.id",
            "memory.user_id",
            "memory.source_session_id",
            "memory.source_message_id",
            "memory.create_time",
            "memory.create_time.seconds",
            "memory.create_time.nanos",
            "memory.update_time",
            "memory.update_time.seconds",
            "memory.update_time.nanos",
            "memory.superseded_by",
        ),
        "the server's: not changed by UpdateMemory",
    ),
    "UpsertSkill": {
        "skill.update_time": "set by the server when it stores the skill",
        "skill.update_time.seconds": "set by the server when it stores the skill",
        "skill.update_time.nanos": "set by the server when it stores the skill",
    },
}

WHEN = datetime(2030, 1, 2, 3, 4, 5, 600_000, tzinfo=UTC)
FILTER = {
    "agent": "a",
    "app": "word",
    "metadata": {"k": "v"},
    "created_after": WHEN,
    "created_before": WHEN,
    "updated_after": WHEN,
    "updated_before": WHEN,
    "as_of": WHEN,
}
PARTS = [
    "look:",
    image_part(url="https://x.test/a.png", width=4, height=5),
    image_part(data=png(2, 3), detail="high"),
]
MESSAGES = [
    {"id": "m1", "role": "user", "content": PARTS},
    {
        "role": "assistant",
        "content": "calling",
        "tool_calls": [{"id": "c1", "name": "f", "arguments": "{}"}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "42"},
]
SESSION = {
    "user_id": "ada",
    "session_id": "s1",
    "scenario": "support",
    "host": "word",
    "variables": {"lang": "en"},
    "memory": True,
    "memory_limit": 3,
    "recent_sessions_limit": 2,
    "cache_layout": "stable_prefix",
}

# Calls that together set every field: (method, positional arguments, keyword arguments).
# Alternatives (system_prompt, layers or session; user_message as text or parts; an
# image's url or data; export_events or export_xml) take a call each.
CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("assemble_prompt", ("i", "r", "s", "m", "mem", "ctx"), {"tokenizer": "estimate"}),
    (
        "build_messages",
        ("hi",),
        {
            "token_budget": 100,
            "system_prompt": ["a", "b"],
            "history": MESSAGES,
            "compression_summary": {
                "message_ids": ["m1"],
                "start_message_id": "m1",
                "summary": "earlier",
            },
            "tokenizer": "estimate",
            "output_format": "openai",
            "on_overflow": "fail",
            "cache_layout": "off",
            "editing": {
                "tool_result_cap_tokens": 500,
                "clear_trigger_tokens": 1000,
                "clear_trigger_tool_uses": 4,
                "keep_tool_results": 2,
                "clear_at_least_tokens": 100,
                "clear_tool_inputs": False,
                "exclude_tools": ["f"],
            },
        },
    ),
    (
        "build_messages",
        (PARTS,),
        {"token_budget": 100, "layers": dict.fromkeys(("identity", "rules", "skill"), "x")},
    ),
    (
        "build_messages",
        ("hi",),
        {"token_budget": 100, "layers": dict.fromkeys(("mode", "memory", "context"), "x")},
    ),
    ("build_messages", ("hi",), {"token_budget": 100, "session": SESSION}),
    ("collect", ("ada", "m2"), {"remember": True, "uncollect": True}),
    ("count_tokens", (["a"], MESSAGES), {"tokenizer": "estimate"}),
    ("list_tokenizers", (), {}),
    (
        "create_session",
        ("ada",),
        {"scenario": "support", "host": "word", "title": "t", "metadata": {"k": "v"}},
    ),
    ("get_session", ("ada", "s1"), {}),
    ("list_sessions", ("ada",), {"page_size": 2}),
    ("delete_session", ("ada", "s1"), {}),
    ("append_messages", ("ada", "s1", MESSAGES), {"turn_index": 2}),
    ("list_messages", ("ada", "s1"), {"page_size": 2}),
    ("add_compression_summary", ("ada", "s1", ["m1"], "sum"), {"start_message_id": "m1"}),
    ("set_session_summary", ("ada", "s1", "sum"), {}),
    ("export_events", ("ada", "s1"), {"after": 3}),
    ("export_xml", ("ada", "s1"), {}),
    ("end_session", ("ada", "s1"), {"mode": "manual"}),
    (
        "add_memory",
        ("ada", "tea"),
        {
            "source_session_id": "s1",
            "source_message_id": "m1",
            "scope": {"agent": "a", "app": "word"},
            "metadata": {"k": "v"},
            "valid_from": WHEN,
            "valid_to": WHEN,
            "expire_time": WHEN,
        },
    ),
    ("search_memories", ("ada", "tea"), {"limit": 3, "filter": FILTER, "explain": True}),
    ("list_memories", ("ada",), {"page_size": 2, "filter": FILTER}),
    ("delete_memory", ("ada", "7"), {}),
    (
        "update_memory",
        (
            "ada",
            "7",
            {
                "content": "x",
                "scope": {"agent": "a", "app": "b"},
                "metadata": {"k": "v"},
                "valid_from": WHEN,
                "valid_to": WHEN,
                "expire_time": WHEN,
            },
        ),
        {"supersede": True},
    ),
    ("list_memory_history", ("ada",), {"memory_id": "7", "page_size": 2}),
    ("upsert_template", ("support", "Be kind."), {"enabled": False}),
    ("list_templates", (), {}),
    ("delete_template", ("support",), {}),
    (
        "upsert_skill",
        ("n", "p"),
        {"description": "d", "apps": ["word"], "enabled": True},
    ),
    ("list_skills", (), {"app": "word", "enabled_only": True}),
    ("delete_skill", ("n",), {}),
    ("delete_user", ("ada",), {"confirm_user_id": "ada"}),
]

RPCS = {method.name: method for service in SERVICES for method in service.methods}


def _unreached(server: RecordingServer) -> dict[str, list[str]]:
    """For each RPC, the fields of its request no recorded request set."""
    out: dict[str, list[str]] = {}
    for name, method in RPCS.items():
        expected = field_paths(method.input_type) - EXEMPT.get(name, {}).keys()
        sent = set().union(*(set_paths(r) for r in server.requests.get(name, [])))
        if expected - sent:
            out[name] = sorted(expected - sent)
    return out


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    with recording_server() as recorder:
        yield recorder


def test_every_request_field_is_reachable_from_the_sync_client(server: RecordingServer) -> None:
    with ContextClient(server.address) as client:
        for method, args, kwargs in CALLS:
            result = getattr(client, method)(*args, **kwargs)
            if method == "export_events":
                list(result)
    assert _unreached(server) == {}
    assert set(server.requests) == RPCS.keys()


async def test_every_request_field_is_reachable_from_the_async_client(
    server: RecordingServer,
) -> None:
    async with AsyncContextClient(server.address) as client:
        for method, args, kwargs in CALLS:
            if method == "export_events":
                [_ async for _ in client.export_events(*args, **kwargs)]
            else:
                await getattr(client, method)(*args, **kwargs)
    assert _unreached(server) == {}
    assert set(server.requests) == RPCS.keys()


def test_every_rpc_but_stream_chat_is_covered_and_every_exemption_is_a_field() -> None:
    every = {
        method.name
        for module in (pb, cpb, spb, mpb, ppb, upb)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }
    assert every - RPCS.keys() == {"StreamChat"}
    for name, fields in EXEMPT.items():
        assert set(fields) <= field_paths(RPCS[name].input_type), name


def test_a_request_field_no_argument_sets_is_found(server: RecordingServer) -> None:
    with ContextClient(server.address) as client:
        client.collect("ada", "m2")
    unreached = _unreached(server)
    assert unreached["Collect"] == ["remember", "uncollect"]
    assert "ListTokenizers" not in unreached  # its request has no fields

"""Every StreamChatRequest field is reachable from ``stream_chat`` of both Python clients,
whose arguments are one shared declaration."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from contextd_client import AsyncContextClient, ContextClient, cpb, image_part, pb

from tests.support.fake_chat_server import FakeChatServer, fake_chat_server
from tests.support.images import png
from tests.support.proto_paths import field_paths, set_paths

# Fields no request sets: the server fills them in.
OUTPUT_ONLY = {"messages.tokens"}

# A text and both kinds of image (an image's url and data are alternatives).
PARTS = [
    "look:",
    image_part(url="https://x.test/a.png", width=4, height=5),
    image_part(data=png(2, 3), detail="high"),
]

# Two turns that together set every field (user_message and user_message_parts are
# alternatives).
TURNS: list[dict[str, Any]] = [
    {
        "user_message": "hi",
        "user_id": "ada",
        "session_id": "s1",
        "scenario": "support",
        "host": "word",
        "variables": {"lang": "en"},
        "memory": True,
        "memory_limit": 3,
        "recent_sessions_limit": 2,
        "cache_layout": "stable_prefix",
        "messages": [
            {"role": "user", "content": PARTS},
            {
                "id": "m2",
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "name": "f", "arguments": "{}"}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
        ],
        "tools": [{"name": "f", "description": "d", "parameters": {"type": "object"}}],
        "tool_results": [{"tool_call_id": "c1", "content": "42"}],
        "tool_protocol": "react",
        "tool_choice": {"function": "f"},
        "parallel_tool_calls": False,
        "prebuilt": True,
        "answer_note": "asked with",
        "response_format": {
            "type": "json_schema",
            "name": "answer",
            "description": "d",
            "schema": {"type": "object"},
            "strict": True,
        },
        "token_budget": 100,
        "tokenizer": "estimate",
        "model": "m",
        "temperature": 0.5,
        "max_output_tokens": 10,
        "stop": ["END"],
        "refuse_over_limit": True,
        "title": "t",
        "mode": "notebook",
        "editing": {
            "tool_result_cap_tokens": 500,
            "clear_trigger_tokens": 1000,
            "clear_trigger_tool_uses": 4,
            "keep_tool_results": 2,
            "clear_at_least_tokens": 100,
            "clear_tool_inputs": True,
            "exclude_tools": ["f"],
        },
        "compaction": {
            "trigger_tokens": 900,
            "trigger_budget_share": 0.5,
            "keep_messages": 4,
            "keep_turns": 1,
            "model": "small",
            "prompt": "Summarize.",
            "timeout_seconds": 5,
            "enabled": True,
        },
    },
    {
        "user_message": PARTS,
        "user_id": "ada",
        "ephemeral": True,
    },
]


EXPECTED = field_paths(cpb.StreamChatRequest.DESCRIPTOR) - OUTPUT_ONLY


@pytest.fixture
def fake() -> Iterator[FakeChatServer]:
    with fake_chat_server() as server:
        yield server


def test_both_clients_have_the_same_stream_chat_arguments() -> None:
    sync = inspect.signature(ContextClient.stream_chat)
    aio = inspect.signature(AsyncContextClient.stream_chat)
    assert list(sync.parameters.values()) == list(aio.parameters.values())
    assert "tool_protocol" in sync.parameters and "cache_layout" in sync.parameters


def test_every_request_field_is_reachable_from_the_sync_client(fake: FakeChatServer) -> None:
    with ContextClient(fake.address) as client:
        for turn in TURNS:
            client.stream_chat(**turn).result()
    sent = set().union(*(set_paths(r) for r in fake.requests))
    assert sorted(EXPECTED - sent) == []


async def test_every_request_field_is_reachable_from_the_async_client(
    fake: FakeChatServer,
) -> None:
    async with AsyncContextClient(fake.address) as client:
        for turn in TURNS:
            await client.stream_chat(**turn).result()
    sent = set().union(*(set_paths(r) for r in fake.requests))
    assert sorted(EXPECTED - sent) == []


def test_new_arguments_are_sent_as_their_enums(fake: FakeChatServer) -> None:
    with ContextClient(fake.address) as client:
        client.stream_chat("hi", user_id="ada", tool_protocol="native", cache_layout="off").result()
        client.stream_chat("hi", user_id="ada").result()
    explicit, default = fake.requests
    assert explicit.tool_protocol == cpb.TOOL_PROTOCOL_NATIVE
    assert explicit.session.cache_layout == pb.CACHE_LAYOUT_OFF
    assert default.tool_protocol == cpb.TOOL_PROTOCOL_UNSPECIFIED
    assert default.session.cache_layout == 0 and default.session.memory_limit == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tool_protocol": "xml"}, "tool_protocol must be 'native', 'react' or None"),
        ({"cache_layout": ["off"]}, "cache_layout must be 'off', 'stable_prefix' or None"),
        ({"tool_choice": "sometimes"}, "tool_choice must be 'auto', 'none', 'required' or"),
        ({"tool_choice": {"function": "f", "x": 1}}, "tool_choice must be"),
        ({"response_format": {"type": "xml"}}, "response_format\\['type'\\] must be"),
        ({"response_format": {"type": "json_object", "shape": 1}}, "unknown keys"),
    ],
)
def test_unknown_names_raise_at_once(kwargs: dict[str, Any], message: str) -> None:
    with ContextClient("127.0.0.1:1") as client, pytest.raises(ValueError, match=message):
        client.stream_chat("hi", user_id="ada", **kwargs)


async def test_build_messages_takes_the_inline_cache_layout(
    client: ContextClient, aclient: AsyncContextClient
) -> None:
    kwargs: dict[str, Any] = {
        "layers": {"identity": "You are Ada.", "memory": "Likes tea."},
        "history": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
        "token_budget": 1000,
        "cache_layout": "stable_prefix",
    }
    built = client.build_messages("Hi", **kwargs)
    assert [m["role"] for m in built.messages] == ["system", "user", "assistant", "system", "user"]
    assert "Likes tea." in built.messages[3]["content"]
    assert (await aclient.build_messages("Hi", **kwargs)).messages == built.messages
    with pytest.raises(ValueError, match="cache_layout must be"):
        client.build_messages("Hi", token_budget=10, cache_layout="on")  # type: ignore[arg-type]

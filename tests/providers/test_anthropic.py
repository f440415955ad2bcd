"""AnthropicProvider against a local server speaking the Messages streaming format."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from contextd.core.formats import to_anthropic
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.providers.anthropic_messages import AnthropicProvider, normalize_stop_reason
from contextd.providers.base import (
    Finished,
    ModelRequest,
    TextDelta,
    ToolCallReady,
    ToolSpec,
    Usage,
)
from contextd.providers.errors import ProviderBadResponse

from tests.support.fakes import anthropic_sse as an
from tests.support.fakes.helpers import FAKE_KEY, collect, collect_until_error, text_of
from tests.support.fakes.llm_server import FakeLLMServer, StreamReply

HISTORY = [
    ChatMessage(Role.SYSTEM, "You are a weather bot."),
    ChatMessage(Role.SYSTEM, "Answer in one line."),
    ChatMessage(Role.USER, "Weather in Paris?"),
    ChatMessage(
        Role.ASSISTANT,
        "Checking.",
        tool_calls=(ToolCall("toolu_1", "get_weather", '{"city":"Paris"}'),),
    ),
    ChatMessage(Role.TOOL, "sunny, 21 C", tool_call_id="toolu_1"),
    ChatMessage(Role.USER, "And in Rome?"),
]
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as server:
        yield server


@pytest.fixture
async def provider(fake: FakeLLMServer) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(api_key=FAKE_KEY, base_url=fake.url, model="claude-test", timeout=5)
    yield p
    await p.aclose()


async def test_text_streaming_and_usage(fake: FakeLLMServer, provider: AnthropicProvider) -> None:
    fake.script(an.text_reply(["Hel", "lo, ", "world!"], input_tokens=42, output_tokens=6))
    events = await collect(provider, ModelRequest(messages=HISTORY))
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo, "),
        TextDelta("world!"),
        Usage(prompt_tokens=42, completion_tokens=6),
        Finished("stop"),
    ]


async def test_request_body_system_apart(fake: FakeLLMServer, provider: AnthropicProvider) -> None:
    fake.script(an.text_reply(["ok"]))
    request = ModelRequest(
        messages=HISTORY, temperature=0.5, stop=["END"], tools=[WEATHER, ToolSpec("now")]
    )
    await collect(provider, request)
    [sent] = fake.requests
    assert sent.path == "/v1/messages"
    assert FAKE_KEY in (sent.headers.get("x-api-key"), sent.headers.get("authorization", "")[7:])
    assert sent.headers.get("anthropic-version")
    expected = to_anthropic(HISTORY)
    assert sent.body == {
        "model": "claude-test",
        "max_tokens": 1024,
        "system": "You are a weather bot.\n\nAnswer in one line.",
        "messages": expected["messages"],
        "stream": True,
        "temperature": 0.5,
        "stop_sequences": ["END"],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather for a city",
                "input_schema": WEATHER.parameters,
            },
            {"name": "now", "input_schema": {"type": "object"}},
        ],
    }
    roles = [m["role"] for m in sent.body["messages"]]
    assert roles == ["user", "assistant", "user"], "no system turn; tool result in a user turn"
    assert sent.body["messages"][2]["content"][0]["type"] == "tool_result"


async def test_max_tokens_and_model_from_request(
    fake: FakeLLMServer, provider: AnthropicProvider
) -> None:
    fake.script(an.text_reply(["ok"]))
    await collect(
        provider,
        ModelRequest(messages=HISTORY[-1:], model="claude-other", max_output_tokens=77),
    )
    body = fake.requests[0].body
    assert (body["model"], body["max_tokens"]) == ("claude-other", 77)
    for absent in ("system", "temperature", "stop_sequences", "tools"):
        assert absent not in body


async def test_default_max_tokens_configurable(fake: FakeLLMServer) -> None:
    provider = AnthropicProvider(api_key=FAKE_KEY, base_url=fake.url, default_max_tokens=4096)
    fake.script(an.text_reply(["ok"]))
    try:
        await collect(provider, ModelRequest(messages=HISTORY))
    finally:
        await provider.aclose()
    assert fake.requests[0].body["max_tokens"] == 4096
    with pytest.raises(ValueError):
        AnthropicProvider(api_key=FAKE_KEY, default_max_tokens=0)


async def test_tool_use_assembled(fake: FakeLLMServer, provider: AnthropicProvider) -> None:
    args_rome = '{"city": "Rome", "unit": "celsius", "note": "naïve \\"quoted\\""}'
    args_oslo = '{"city": "Oslo"}'
    fake.script(
        StreamReply(
            [
                an.message_start(120, cache_read=30, cache_creation=5),
                *an.text_block(0, ["Let me ", "check."]),
                an.ping(),
                *an.tool_use_block(1, "toolu_rome", "get_weather", args_rome, pieces=11),
                *an.tool_use_block(2, "toolu_oslo", "get_weather", args_oslo, pieces=4),
                an.message_delta("tool_use", 58),
                an.message_stop(),
            ]
        )
    )
    events = await collect(provider, ModelRequest(messages=HISTORY, tools=[WEATHER]))
    assert events == [
        TextDelta("Let me "),
        TextDelta("check."),
        ToolCallReady(ToolCall("toolu_rome", "get_weather", args_rome)),
        ToolCallReady(ToolCall("toolu_oslo", "get_weather", args_oslo)),
        # prompt: input + cache read + cache creation
        Usage(prompt_tokens=155, completion_tokens=58, cache_read_tokens=30, cache_write_tokens=5),
        Finished("tool_calls"),
    ]


async def test_tool_use_without_input_deltas(
    fake: FakeLLMServer, provider: AnthropicProvider
) -> None:
    start = an.event(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_x", "name": "now", "input": {}},
        }
    )
    stop = an.event({"type": "content_block_stop", "index": 0})
    fake.script(
        StreamReply(
            [an.message_start(), start, stop, an.message_delta("tool_use", 3), an.message_stop()]
        )
    )
    events = await collect(provider, ModelRequest(messages=HISTORY))
    assert events[0] == ToolCallReady(ToolCall("toolu_x", "now", "{}"))


async def test_thinking_and_unknown_events_skipped(
    fake: FakeLLMServer, provider: AnthropicProvider
) -> None:
    thinking = [
        an.event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            }
        ),
        an.event(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "hmm"},
            }
        ),
        an.event(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": "sig"},
            }
        ),
        an.event({"type": "content_block_stop", "index": 0}),
        an.event({"type": "some_future_event", "index": 9}),
    ]
    fake.script(
        StreamReply(
            [
                an.message_start(),
                *thinking,
                *an.text_block(1, ["answer"]),
                an.message_delta("end_turn", 9),
                an.message_stop(),
            ]
        )
    )
    events = await collect(provider, ModelRequest(messages=HISTORY))
    assert text_of(events) == "answer"
    assert events[-1] == Finished("stop")


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "other"),
    ],
)
async def test_stop_reasons(
    fake: FakeLLMServer, provider: AnthropicProvider, raw: str, normalized: str
) -> None:
    fake.script(an.text_reply(["x"], stop_reason=raw))
    events = await collect(provider, ModelRequest(messages=HISTORY))
    assert events[-1] == Finished(normalized)
    assert normalize_stop_reason(raw) == normalized


async def test_stream_ending_before_message_stop_is_bad_response(
    fake: FakeLLMServer, provider: AnthropicProvider
) -> None:
    fake.script(StreamReply([an.message_start(), *an.text_block(0, ["par", "tial"])]))
    events, error = await collect_until_error(provider, ModelRequest(messages=HISTORY))
    assert text_of(events) == "partial"
    assert isinstance(error, ProviderBadResponse)
    assert "message_stop" in str(error)


async def test_input_json_delta_for_a_text_block_is_bad_response(
    fake: FakeLLMServer, provider: AnthropicProvider
) -> None:
    wrong = an.event(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{"},
        }
    )
    fake.script(StreamReply([an.message_start(), *an.text_block(0, ["a"])[:2], wrong]))
    _, error = await collect_until_error(provider, ModelRequest(messages=HISTORY))
    assert isinstance(error, ProviderBadResponse)

"""OpenAIProvider against a local server speaking the Chat Completions streaming format."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from contextd.core.content import ImageDetail, ImagePart, TextPart
from contextd.core.formats import to_openai
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.providers._sdk import Redactor
from contextd.providers.base import (
    Finished,
    ModelEvent,
    ModelRequest,
    ResponseFormat,
    TextDelta,
    ToolCallReady,
    ToolChoice,
    ToolSpec,
    Usage,
)
from contextd.providers.errors import ProviderBadResponse
from contextd.providers.openai_compat import (
    ChunkAssembler,
    OpenAIProvider,
    normalize_finish_reason,
)

from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY, collect, collect_until_error, text_of
from tests.support.fakes.llm_server import FakeLLMServer, StreamReply, sse

HISTORY = [
    ChatMessage(Role.SYSTEM, "You are a weather bot."),
    ChatMessage(Role.USER, "Weather in Paris?"),
    ChatMessage(
        Role.ASSISTANT, "", tool_calls=(ToolCall("call_1", "get_weather", '{"city":"Paris"}'),)
    ),
    ChatMessage(Role.TOOL, "sunny, 21 C", tool_call_id="call_1"),
    ChatMessage(Role.USER, "And in Rome?"),
]
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer(base_path="/v1") as server:
        yield server


@pytest.fixture
async def provider(fake: FakeLLMServer) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider(api_key=FAKE_KEY, base_url=fake.url, model="gpt-test", timeout=5)
    yield p
    await p.aclose()


async def test_text_streaming_and_usage(fake: FakeLLMServer, provider: OpenAIProvider) -> None:
    fake.script(oa.text_reply(["Hel", "lo, ", "wor", "ld!"], usage=(31, 4)))
    events = await collect(provider, ModelRequest(messages=HISTORY))
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo, "),
        TextDelta("wor"),
        TextDelta("ld!"),
        Usage(prompt_tokens=31, completion_tokens=4),
        Finished("stop"),
    ]


async def test_request_body_and_headers(fake: FakeLLMServer, provider: OpenAIProvider) -> None:
    fake.script(oa.text_reply(["ok"]))
    request = ModelRequest(
        messages=HISTORY,
        temperature=0.3,
        max_output_tokens=256,
        stop=["\n\nUser:", "END"],
        tools=[WEATHER, ToolSpec("now")],
    )
    await collect(provider, request)
    [sent] = fake.requests
    assert sent.method == "POST"
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {FAKE_KEY}"
    assert sent.body == {
        "model": "gpt-test",
        "messages": to_openai(HISTORY)["messages"],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.3,
        "max_tokens": 256,
        "stop": ["\n\nUser:", "END"],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather for a city",
                    "parameters": WEATHER.parameters,
                },
            },
            {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}},
        ],
    }
    # The neutral tool call and its result, in OpenAI's shape.
    assert sent.body["messages"][2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert sent.body["messages"][3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "sunny, 21 C",
    }


async def test_body_is_what_the_sdk_create_would_send(fake: FakeLLMServer) -> None:
    """The provider posts its body as it is, skipping the SDK's walk of it against its
    parameter types in ``create``: for every field a body of contextd's can hold (images,
    tool calls and results, tools, a forced choice, a JSON schema), the walk would have
    sent the same JSON."""
    image = ImagePart(data=b"\x89PNG....", media_type="image/png", detail=ImageDetail.LOW)
    messages = [
        *HISTORY,
        ChatMessage(Role.USER, "And this?", parts=(TextPart("And this?"), image)),
    ]
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    request = ModelRequest(
        messages=messages,
        temperature=0.2,
        max_output_tokens=64,
        stop=["END"],
        tools=[WEATHER, ToolSpec("now")],
        tool_choice=ToolChoice("function", "get_weather"),
        parallel_tool_calls=False,
        response_format=ResponseFormat("json_schema", "city", "A city", schema, strict=True),
    )
    provider = OpenAIProvider(api_key=FAKE_KEY, base_url=fake.url, model="gpt-test")
    fake.script(oa.text_reply(["ok"]), repeat_last=True)
    try:
        await collect(provider, request)
        body = provider.request_body(request)
        sdk_stream = await provider.client.chat.completions.create(**body)
        async with sdk_stream:
            async for _ in sdk_stream:
                pass
    finally:
        await provider.aclose()
    posted, created = fake.requests
    assert posted.body == created.body == body
    assert posted.headers["authorization"] == created.headers["authorization"]


async def test_request_model_overrides_and_minimal_body(
    fake: FakeLLMServer, provider: OpenAIProvider
) -> None:
    fake.script(oa.text_reply(["ok"]))
    await collect(provider, ModelRequest(messages=HISTORY[-1:], model="other-model"))
    body = fake.requests[0].body
    assert body["model"] == "other-model"
    for absent in ("temperature", "max_tokens", "stop", "tools"):
        assert absent not in body


async def test_options_for_other_servers(fake: FakeLLMServer) -> None:
    """Azure-style query/header defaults, max_completion_tokens, no stream_options."""
    provider = OpenAIProvider(
        api_key=FAKE_KEY,
        base_url=fake.url,
        default_query={"api-version": "2024-10-21"},
        default_headers={"api-key": FAKE_KEY},
        include_usage=False,
        max_tokens_param="max_completion_tokens",
    )
    fake.script(oa.text_reply(["ok"], usage=None))
    try:
        events = await collect(provider, ModelRequest(messages=HISTORY, max_output_tokens=9))
    finally:
        await provider.aclose()
    assert events == [TextDelta("ok"), Finished("stop")], "no usage reported, none sent"
    [sent] = fake.requests
    assert sent.query == {"api-version": "2024-10-21"}
    assert sent.headers["api-key"] == FAKE_KEY
    assert "stream_options" not in sent.body
    assert sent.body["max_completion_tokens"] == 9
    assert "max_tokens" not in sent.body
    assert FAKE_KEY not in repr(provider)


async def test_parallel_tool_calls_assembled(fake: FakeLLMServer, provider: OpenAIProvider) -> None:
    calls = [
        ("call_paris", "get_weather", '{"city": "Paris", "unit": "celsius", "days": 3}'),
        ("call_rome", "get_weather", '{"city": "Rome", "note": "naïve \\"quoted\\" text"}'),
    ]
    fake.script(StreamReply(oa.tool_call_frames(calls, pieces=9, text_before="Let me check.")))
    events = await collect(provider, ModelRequest(messages=HISTORY, tools=[WEATHER]))
    assert events == [
        TextDelta("Let me check."),
        ToolCallReady(ToolCall(*calls[0])),
        ToolCallReady(ToolCall(*calls[1])),
        Usage(prompt_tokens=40, completion_tokens=25),
        Finished("tool_calls"),
    ]


async def test_sequential_tool_calls_assembled(
    fake: FakeLLMServer, provider: OpenAIProvider
) -> None:
    calls = [("a", "first", '{"x": 1}'), ("b", "second", "{}"), ("c", "third", '{"y": [1, 2]}')]
    fake.script(StreamReply(oa.tool_call_frames(calls, pieces=3, interleave=False)))
    events = await collect(provider, ModelRequest(messages=HISTORY))
    ready = [e.call for e in events if isinstance(e, ToolCallReady)]
    assert ready == [ToolCall(*c) for c in calls]


async def test_tool_calls_emitted_when_finish_reason_arrives(
    fake: FakeLLMServer, provider: OpenAIProvider
) -> None:
    frames = oa.tool_call_frames([("call_1", "get_weather", '{"city": "Oslo"}')])
    # The usage chunk and [DONE] come half a second after the finish_reason chunk.
    frames[-2] = sse(oa.chunk(usage=(40, 25), no_choices=True), delay=0.5)
    fake.script(StreamReply(frames))
    stream = provider.stream(ModelRequest(messages=HISTORY))
    first = await anext(stream)
    assert isinstance(first, ToolCallReady)
    assert fake.completed == [], "the call came before the stream ended"
    rest = [event async for event in stream]
    assert rest == [Usage(40, 25), Finished("tool_calls")]


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool_calls"),
        ("function_call", "tool_calls"),
        ("content_filter", "content_filter"),
        ("something_new", "other"),
    ],
)
async def test_finish_reasons(
    fake: FakeLLMServer, provider: OpenAIProvider, raw: str, normalized: str
) -> None:
    fake.script(oa.text_reply(["x"], finish_reason=raw))
    events = await collect(provider, ModelRequest(messages=HISTORY))
    assert events[-1] == Finished(normalized)


async def test_stop_with_tool_calls_counts_as_tool_calls(
    fake: FakeLLMServer, provider: OpenAIProvider
) -> None:
    fake.script(StreamReply(oa.tool_call_frames([("c", "f", "{}")], finish_reason="stop")))
    events = await collect(provider, ModelRequest(messages=HISTORY))
    assert events[-1] == Finished("tool_calls")


async def test_usage_chunk_with_null_choices(fake: FakeLLMServer, provider: OpenAIProvider) -> None:
    """vLLM ends with a usage chunk whose choices is null."""
    usage_chunk = oa.chunk(usage=(5, 2), no_choices=True)
    usage_chunk["choices"] = None
    frames = oa.text_frames(["hi"], usage=None, with_done=False)
    fake.script(StreamReply([*frames, sse(usage_chunk), oa.done()]))
    events = await collect(provider, ModelRequest(messages=HISTORY))
    assert events == [TextDelta("hi"), Usage(5, 2), Finished("stop")]


async def test_finish_without_done_is_accepted(
    fake: FakeLLMServer, provider: OpenAIProvider
) -> None:
    fake.script(oa.text_reply(["hi"], with_done=False))
    events = await collect(provider, ModelRequest(messages=HISTORY))
    assert events[-1] == Finished("stop")


async def test_stream_ending_before_finish_reason_is_bad_response(
    fake: FakeLLMServer, provider: OpenAIProvider
) -> None:
    fake.script(StreamReply(oa.text_frames(["a", "b"])[:3]))  # role + two deltas, clean end
    events, error = await collect_until_error(provider, ModelRequest(messages=HISTORY))
    assert text_of(events) == "ab"
    assert isinstance(error, ProviderBadResponse)


# -- the assembler on its own: shapes some servers send ---------------------------


def _assemble(chunks: list[dict[str, Any]]) -> list[ModelEvent]:
    assembler = ChunkAssembler("openai", Redactor([]))
    events: list[ModelEvent] = []
    for item in chunks:
        events += assembler.feed(item)
    return events + assembler.end()


def test_tool_calls_without_index_are_split_by_id() -> None:
    events = _assemble(
        [
            oa.chunk({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]}),
            oa.chunk({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "{"}}]}),
            oa.chunk({"tool_calls": [{"function": {"arguments": "}"}}]}),
            oa.chunk({}, finish_reason="tool_calls"),
        ]
    )
    assert events == [
        ToolCallReady(ToolCall("a", "f", "{}")),
        ToolCallReady(ToolCall("b", "g", "{}")),
        Finished("tool_calls"),
    ]


def test_tool_call_without_id_gets_one_and_repeated_name_is_kept_once() -> None:
    events = _assemble(
        [
            oa.chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{"}}]}),
            oa.chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "}"}}]}),
            oa.chunk({}, finish_reason="tool_calls"),
        ]
    )
    assert events[0] == ToolCallReady(ToolCall("call_0", "f", "{}"))


@pytest.mark.parametrize(
    "bad",
    [
        {"choices": "nope"},
        {"choices": [{"index": 0, "delta": {"content": 5}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "x"}]}}]},
        {"choices": [{"index": 0, "delta": {}}], "usage": {"prompt_tokens": "many"}},
    ],
)
def test_malformed_chunks_raise(bad: dict[str, Any]) -> None:
    assembler = ChunkAssembler("openai", Redactor([]))
    with pytest.raises((TypeError, ProviderBadResponse)):
        assembler.feed(bad)


def test_tool_call_without_name_is_bad_response() -> None:
    with pytest.raises(ProviderBadResponse):
        _assemble(
            [
                oa.chunk({"tool_calls": [{"index": 0, "id": "a"}]}),
                oa.chunk({}, finish_reason="tool_calls"),
            ]
        )


def test_normalize_finish_reason() -> None:
    assert normalize_finish_reason("stop") == "stop"
    assert normalize_finish_reason("stop", had_tool_calls=True) == "tool_calls"
    assert normalize_finish_reason("length", had_tool_calls=True) == "length"
    assert normalize_finish_reason("") == "other"


async def test_other_choices_are_ignored(fake: FakeLLMServer, provider: OpenAIProvider) -> None:
    second = oa.chunk({"content": "IGNORED"})
    second["choices"][0]["index"] = 1
    frames = oa.text_frames(["kept"])
    fake.script(StreamReply([frames[0], sse(second), *frames[1:]]))
    events = await collect(provider, ModelRequest(messages=HISTORY))
    assert text_of(events) == "kept"


async def test_concurrent_streams_share_one_provider(
    fake: FakeLLMServer, provider: OpenAIProvider
) -> None:
    fake.script(oa.text_reply(["same"]), repeat_last=True)
    results = await asyncio.gather(
        *(collect(provider, ModelRequest(messages=HISTORY)) for _ in range(5))
    )
    assert all(text_of(r) == "same" for r in results)
    assert len(fake.requests) == 5

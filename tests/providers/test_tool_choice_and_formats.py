"""tool_choice, parallel_tool_calls and structured output in each provider's own terms:
the request bodies sent, Anthropic's own structured output where the model has it and
its forced answer tool read back as the answer's text where not, and the offline echo
model playing along (core/schema_example.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import jsonschema
import pytest
from contextd.core.messages import ChatMessage, Role
from contextd.core.schema_example import example
from contextd.providers.anthropic_messages import AnthropicProvider
from contextd.providers.base import (
    Finished,
    ModelRequest,
    ResponseFormat,
    TextDelta,
    ToolCallReady,
    ToolChoice,
    ToolSpec,
)
from contextd.providers.echo import EchoProvider
from contextd.providers.openai_compat import OpenAIProvider

from tests.support.fakes import anthropic_sse as an
from tests.support.fakes.helpers import FAKE_KEY, collect
from tests.support.fakes.llm_server import FakeLLMServer, StreamReply

ASK = [ChatMessage(Role.USER, "Weather?")]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["city", "tags"],
    "additionalProperties": False,
}
WEATHER = ToolSpec("get_weather", "", SCHEMA)
NOW = ToolSpec("now")
CITY = ResponseFormat("json_schema", "City", "A city.", SCHEMA, strict=True)


def openai() -> OpenAIProvider:
    return OpenAIProvider(api_key=FAKE_KEY, base_url="http://127.0.0.1:9/v1")


def anthropic(url: str = "http://127.0.0.1:9") -> AnthropicProvider:
    return AnthropicProvider(api_key=FAKE_KEY, base_url=url)


@pytest.mark.parametrize(
    ("choice", "parallel", "openai_sent", "anthropic_sent"),
    [
        (ToolChoice(), None, None, None),
        (ToolChoice(), False, None, {"type": "auto", "disable_parallel_tool_use": True}),
        (ToolChoice("none"), None, "none", {"type": "none"}),
        (ToolChoice("required"), None, "required", {"type": "any"}),
        (
            ToolChoice("function", "now"),
            False,
            {"type": "function", "function": {"name": "now"}},
            {"type": "tool", "name": "now", "disable_parallel_tool_use": True},
        ),
    ],
)
def test_tool_choice_in_each_providers_terms(
    choice: ToolChoice, parallel: bool | None, openai_sent: Any, anthropic_sent: Any
) -> None:
    request = ModelRequest(
        ASK, tools=[WEATHER, NOW], tool_choice=choice, parallel_tool_calls=parallel
    )
    body = openai().request_body(request)
    assert body.get("tool_choice") == openai_sent
    assert body.get("parallel_tool_calls") == parallel
    assert anthropic().request_body(request).get("tool_choice") == anthropic_sent


def test_no_tools_no_tool_choice() -> None:
    request = ModelRequest(ASK, tool_choice=ToolChoice("none"))
    assert "tool_choice" not in openai().request_body(request)
    assert "tool_choice" not in anthropic().request_body(request)


def test_openai_response_format() -> None:
    assert openai().request_body(ModelRequest(ASK, response_format=CITY))["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "City", "description": "A city.", "schema": SCHEMA, "strict": True},
    }
    json_object = ModelRequest(ASK, response_format=ResponseFormat("json_object"))
    assert openai().request_body(json_object)["response_format"] == {"type": "json_object"}
    assert "response_format" not in openai().request_body(ModelRequest(ASK))


@pytest.mark.parametrize(
    "model",
    [
        "claude-sonnet-4-6",
        "claude-opus-4-1-20250805",
        "claude-haiku-4-5",
        "claude-sonnet-4-5-20250929",
        "claude-opus-4-5",
    ],
)
def test_anthropic_structured_output_is_its_own_where_the_model_has_it(model: str) -> None:
    body = anthropic().request_body(ModelRequest(ASK, response_format=CITY, model=model))
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert "tools" not in body and "tool_choice" not in body
    # Beside host tools too, which the model may still call.
    beside = anthropic().request_body(
        ModelRequest(ASK, tools=[WEATHER], response_format=CITY, model=model)
    )
    assert [t["name"] for t in beside["tools"]] == ["get_weather"]
    assert "tool_choice" not in beside and "output_config" in beside


@pytest.mark.parametrize(
    "model",
    [
        "claude-3-7-sonnet-latest",
        "claude-3-5-haiku-20241022",
        "claude-sonnet-4-20250514",
        "claude-sonnet-4-0",
        "claude-opus-4-20250514",
        "claude-opus-4-0",
        "my-proxy-model",
    ],
)
def test_anthropic_structured_output_is_a_forced_tool_where_not(model: str) -> None:
    body = anthropic().request_body(ModelRequest(ASK, response_format=CITY, model=model))
    assert "output_config" not in body
    assert body["tools"] == [{"name": "City", "description": "A city.", "input_schema": SCHEMA}]
    assert body["tool_choice"] == {"type": "tool", "name": "City"}


def test_anthropic_json_object_is_a_forced_tool() -> None:
    """Anthropic's own format needs a schema: a JSON object without one is the tool's."""
    beside = anthropic().request_body(
        ModelRequest(ASK, tools=[WEATHER], response_format=ResponseFormat("json_object"))
    )
    assert "output_config" not in beside
    assert [t["name"] for t in beside["tools"]] == ["get_weather", "answer"]
    assert beside["tools"][1]["input_schema"] == {"type": "object"}
    assert beside["tool_choice"] == {"type": "any"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as server:
        yield server


async def test_anthropic_native_structured_output_on_the_wire(fake: FakeLLMServer) -> None:
    answer = '{"city": "Paris", "tags": ["sunny"]}'
    fake.script(an.text_reply([answer[:9], answer[9:]], output_tokens=12))
    provider = anthropic(fake.url)
    try:
        events = await collect(
            provider, ModelRequest(ASK, response_format=CITY, model="claude-sonnet-4-6")
        )
    finally:
        await provider.aclose()
    [sent] = fake.requests
    assert sent.path == "/v1/messages"
    assert sent.body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert "tools" not in sent.body and "tool_choice" not in sent.body
    assert sent.body["model"] == "claude-sonnet-4-6" and sent.body["stream"] is True
    assert "anthropic-beta" not in sent.headers  # generally available: no beta header
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == answer
    assert events[-1] == Finished("stop")


async def test_anthropic_answer_tool_streams_as_text(fake: FakeLLMServer) -> None:
    answer = '{"city": "Paris", "tags": []}'
    fake.script(
        StreamReply(
            [
                an.message_start(10),
                *an.tool_use_block(0, "toolu_1", "City", answer, pieces=3),
                an.message_delta("tool_use", 7),
                an.message_stop(),
            ]
        )
    )
    provider = anthropic(fake.url)
    try:
        events = await collect(
            provider, ModelRequest(ASK, response_format=CITY, model="claude-3-7-sonnet-latest")
        )
    finally:
        await provider.aclose()
    [sent] = fake.requests
    assert sent.body["tool_choice"] == {"type": "tool", "name": "City"}
    assert "output_config" not in sent.body
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == answer
    assert not [e for e in events if isinstance(e, ToolCallReady)]
    assert events[-1] == Finished("stop")


async def test_echo_calls_the_tools_tool_choice_requires() -> None:
    echo = EchoProvider()
    every = await collect(
        echo, ModelRequest(ASK, tools=[WEATHER, NOW], tool_choice=ToolChoice("required"))
    )
    calls = [e.call for e in every if isinstance(e, ToolCallReady)]
    assert [c.name for c in calls] == ["get_weather", "now"]
    assert len({c.id for c in calls}) == 2
    jsonschema.validate(json.loads(calls[0].arguments), SCHEMA)
    assert every[-1] == Finished("tool_calls")
    one = await collect(
        echo,
        ModelRequest(ASK, tools=[WEATHER, NOW], tool_choice=ToolChoice("function", "now")),
    )
    assert [e.call.name for e in one if isinstance(e, ToolCallReady)] == ["now"]
    auto = await collect(echo, ModelRequest(ASK, tools=[WEATHER, NOW]))
    assert not [e for e in auto if isinstance(e, ToolCallReady)]


async def test_echo_answers_json_under_a_json_format() -> None:
    events = await collect(EchoProvider(), ModelRequest(ASK, response_format=CITY))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    jsonschema.validate(json.loads(text), SCHEMA)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "minLength": 12, "maxLength": 20},
        {"type": "integer", "exclusiveMinimum": 5, "multipleOf": 4},
        {"type": "number", "maximum": 0.5},
        {"type": ["null", "boolean"]},
        {"enum": ["b", "a"]},
        {"const": {"x": 1}},
        {"type": "array", "minItems": 3, "items": {"type": "string", "format": "email"}},
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "integer"}}},
                {"required": ["a"]},
            ]
        },
        {"oneOf": [{"type": "null"}, {"type": "object", "properties": {"b": {"type": "boolean"}}}]},
        {
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {"next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
                }
            },
            "$ref": "#/$defs/Node",
        },
        {
            "definitions": {"A": {"type": "string", "format": "date-time"}},
            "$ref": "#/definitions/A",
        },
    ],
)
def test_an_example_is_valid_against_its_schema(schema: dict[str, Any]) -> None:
    value = example(schema)
    jsonschema.validate(value, schema)
    assert example(schema) == value, "the same every time"

"""Inline requests are the host's own list and nothing more: a list that ends with tool
results goes on to the model's next step with nothing stored, a one-message request gets
no memories or summaries, and an inline prompt over --max-prompt-tokens is refused.
tool_choice, parallel_tool_calls and response_format reach the provider as OpenAI
names them."""

from __future__ import annotations

from typing import Any

import grpc
import openai
import pytest
from contextd.v1 import memory_pb2, memory_pb2_grpc

from tests.openai_http.conftest import MODEL, Served
from tests.openai_http.test_python_sdk import WEATHER_TOOL, client

CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}
LOOP: list[Any] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
]


def test_an_inline_list_ending_with_tool_results_goes_on_to_the_next_step(
    served: Served,
) -> None:
    before = len(served.sessions("sam"))
    with client(served) as c:
        answer = c.chat.completions.create(
            model=MODEL, messages=LOOP, user="sam", tools=[WEATHER_TOOL]
        )
    assert answer.choices[0].message.content == "the tool said: sunny"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.model_extra is not None and answer.model_extra["contextd"]["mode"] == "inline"
    sent = served.model.chat_requests()[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[2]["tool_calls"][0]["id"] == "call_1"
    # Nothing stored, as for any inline turn.
    assert len(served.sessions("sam")) == before


def test_a_streamed_inline_continuation(served: Served) -> None:
    with client(served) as c:
        stream = c.chat.completions.create(
            model=MODEL, messages=LOOP, user="sam", tools=[WEATHER_TOOL], stream=True
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "the tool said: sunny"


def test_an_inline_list_may_not_end_with_the_assistant(served: Served) -> None:
    with client(served) as c, pytest.raises(openai.BadRequestError) as refused:
        c.chat.completions.create(model=MODEL, messages=LOOP[:3], user="sam")
    assert refused.value.param == "messages[2].role"


def test_a_one_message_inline_request_gets_no_memories(served: Served) -> None:
    with grpc.insecure_channel(served.proc.address) as channel:
        memory_pb2_grpc.MemoryServiceStub(channel).AddMemory(
            memory_pb2.AddMemoryRequest(user_id="mia", content="Mia is vegetarian.")
        )
    with client(served) as c:
        answer = c.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Is Mia vegetarian?"}],
            user="mia",
            tools=[WEATHER_TOOL],
        )
    assert answer.choices[0].message.content == "fake answer to: Is Mia vegetarian?"
    sent = served.model.chat_requests()[-1]
    assert sent["messages"] == [{"role": "user", "content": "Is Mia vegetarian?"}]
    # Nor the tool that would search them.
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather"]


def test_an_inline_prompt_over_max_prompt_tokens_is_refused(served: Served) -> None:
    calls = len(served.model.chat_requests())
    huge = " ".join(f"word{i}" for i in range(40_000))  # far over the default 8,000 tokens
    with client(served) as c, pytest.raises(openai.BadRequestError) as refused:
        c.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": huge}], user="sam"
        )
    assert refused.value.code == "context_length_exceeded"
    assert "max_prompt_tokens (8000)" in refused.value.message
    assert len(served.model.chat_requests()) == calls, "the model was not called"


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("required", "required"),
        ("none", "none"),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            {"type": "function", "function": {"name": "get_weather"}},
        ),
    ],
)
def test_tool_choice_reaches_the_provider(served: Served, choice: Any, sent: Any) -> None:
    with client(served) as c:
        c.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hello"}],
            user="sam",
            tools=[WEATHER_TOOL],
            tool_choice=choice,
            parallel_tool_calls=False,
        )
    body = served.model.chat_requests()[-1]
    assert body["tool_choice"] == sent
    assert body["parallel_tool_calls"] is False
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"]


def test_response_format_reaches_the_provider(served: Served) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    with client(served) as c:
        c.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "a city"}],
            user="sam",
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "City", "schema": schema, "strict": True},
            },
        )
        assert served.model.chat_requests()[-1]["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "City", "schema": schema, "strict": True},
        }
        c.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "a city"}],
            user="sam",
            response_format={"type": "json_object"},
        )
    assert served.model.chat_requests()[-1]["response_format"] == {"type": "json_object"}


def test_an_answer_the_sdk_returned_is_accepted_back(served: Served) -> None:
    with client(served) as c:
        first = c.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Hi"}], user="sam"
        )
        # Every field the SDK's message holds, nulls included (annotations, audio, ...).
        returned = first.choices[0].message.model_dump(exclude={"contextd"})
        returned["annotations"] = []
        second = c.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "user", "content": "Hi"},
                returned,
                {"role": "user", "content": "And now?"},
            ],
            user="sam",
        )
    assert second.choices[0].message.content == "fake answer to: And now?"

"""The official ``openai`` Python SDK (sync, async, streaming) pointed at contextd's /v1
API: inline turns, session turns, host tools, model options and usage, each answer
checked against the SDK's own types."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import openai
import pytest
from openai.types import Model as ModelObject
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tests.openai_http.conftest import MODEL, Served
from tests.support.images import png

SYSTEM = {"role": "system", "content": "You are terse."}
WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def client(served: Served, max_retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.base_url, api_key="unused", max_retries=max_retries)


def aclient(served: Served) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=served.base_url, api_key="unused", max_retries=0)


def validated(raw: openai.APIResponse[Any]) -> ChatCompletion:
    """The raw JSON body, validated against the SDK's type (the SDK itself builds its
    objects without validation)."""
    return ChatCompletion.model_validate(raw.http_response.json())


def sse_chunks(served: Served, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """A streaming request's events as sent, and its last data line."""
    with (
        httpx.Client(timeout=30) as http,
        http.stream(
            "POST",
            f"{served.base_url}/chat/completions",
            json={**body, "stream": True},
            headers={"Authorization": "Bearer unused"},
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    return [json.loads(d) for d in data[:-1]], data[-1]


def test_models_list_the_configured_model(served: Served) -> None:
    with client(served) as c:
        listed = c.models.list()
        assert [m.id for m in listed.data] == [MODEL]
        ModelObject.model_validate(listed.data[0].model_dump())
        assert listed.data[0].owned_by == "openai"
        assert c.models.retrieve(MODEL).id == MODEL
        with pytest.raises(openai.NotFoundError) as missing:
            c.models.retrieve("gpt-nothing")
        assert missing.value.code == "model_not_found"


def test_an_inline_turn_with_the_sync_client(served: Served) -> None:
    with client(served) as c:
        raw = c.chat.completions.with_raw_response.create(
            model=MODEL, messages=[SYSTEM, {"role": "user", "content": "Hi there"}], user="ann"
        )
    answer = validated(raw)
    assert answer.object == "chat.completion" and answer.id.startswith("chatcmpl-")
    assert answer.model == MODEL
    choice = answer.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "fake answer to: Hi there"
    assert choice.finish_reason == "stop"
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (11, 7)
    assert answer.usage.total_tokens == 18
    assert answer.usage.prompt_tokens_details is not None
    assert answer.usage.prompt_tokens_details.cached_tokens == 3
    extension = (answer.model_extra or {})["contextd"]
    assert extension["mode"] == "inline" and extension["status"] == "ok"
    assert extension["report"]["system_tokens"] > 0
    assert raw.headers["x-contextd-session-id"] == extension["session_id"]
    # The provider got the host's own list: its system prompt, then the message.
    sent = served.model.chat_requests()[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "You are terse."}
    assert sent[-1] == {"role": "user", "content": "Hi there"}
    # Nothing of an inline turn is stored: it has no session.
    assert extension["session_id"] == "" and extension["assistant_message_id"] == ""


def test_an_inline_history_is_fitted_to_the_budget(served: Served) -> None:
    """contextd trims the host's list to --max-prompt-tokens and says what it dropped."""
    filler = "lorem ipsum dolor sit amet " * 60  # ~ 300 tokens a message
    history = [
        {"role": "user" if k % 2 == 0 else "assistant", "content": f"{k}: {filler}"}
        for k in range(60)
    ]
    with client(served) as c:
        raw = c.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[SYSTEM, *history, {"role": "user", "content": "And now?"}],
            user="ann",
        )
    report = validated(raw).model_extra["contextd"]["report"]  # type: ignore[index]
    assert report["dropped"][0]["reason"] == "DROP_REASON_BUDGET"
    assert report["dropped"][0]["start_index"] == 0
    assert 0 < report["history_kept"] < 60
    assert report["total_tokens"] <= report["token_budget"]
    sent = served.model.chat_requests()[-1]["messages"]
    assert len(sent) == 2 + report["history_kept"]  # system, the history kept, the message


async def test_an_async_stream_with_usage(served: Served) -> None:
    async with aclient(served) as c:
        stream = await c.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Stream it"}],
            user="ann",
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "fake answer to: Stream it"
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finishing] == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 7
    assert all(c.usage is None for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1


def test_a_sync_stream_as_sent_fits_the_sdk_types(served: Served) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Raw"}], "user": "ann"}
    chunks, last = sse_chunks(served, {**body, "stream_options": {"include_usage": True}})
    assert last == "[DONE]"
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
    assert all("usage" in c for c in chunks)
    assert chunks[0]["contextd"]["mode"] == "inline"
    # Without include_usage no chunk carries usage at all.
    plain, _ = sse_chunks(served, body)
    assert not any("usage" in c for c in plain)
    with client(served) as c:
        text = "".join(
            chunk.choices[0].delta.content or ""
            for chunk in c.chat.completions.create(
                model=MODEL, messages=body["messages"], user="ann", stream=True
            )
            if chunk.choices
        )
    assert text == "fake answer to: Raw"


def test_session_mode_sends_only_the_new_message(served: Served) -> None:
    with client(served) as c:
        first = c.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[{"role": "user", "content": "My name is Ann."}],
            user="ann",
            extra_headers={"X-Contextd-Session": "new"},
            metadata={"contextd_title": "Names"},
        )
        session_id = first.headers["x-contextd-session-id"]
        second = c.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "What is my name?"}],
            user="ann",
            metadata={"contextd_session": session_id},
        )
    extension = (second.model_extra or {})["contextd"]
    assert extension["mode"] == "session"
    assert (extension["session_id"], extension["turn_index"]) == (session_id, 2)
    layers = {layer["name"] for layer in extension["report"]["context_layers"]}
    assert {"system", "window", "user_message"} <= layers
    # contextd supplied the history: the first turn reached the model with the second.
    sent = served.model.chat_requests()[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == [
        "My name is Ann.",
        "What is my name?",
    ]
    [session] = [s for s in served.sessions("ann") if s.id == session_id]
    assert session.title == "Names" and session.message_count == 4


def test_host_tools_end_the_turn_and_their_results_continue_it(served: Served) -> None:
    with client(served) as c:
        asked = c.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[{"role": "user", "content": "What is the weather in Paris?"}],
            user="ann",
            tools=[WEATHER_TOOL],
            extra_headers={"X-Contextd-Session": "new"},
        )
        answer = validated(asked)
        session_id = asked.headers["x-contextd-session-id"]
        choice = answer.choices[0]
        assert choice.finish_reason == "tool_calls"
        [call] = choice.message.tool_calls or []
        assert call.type == "function" and call.id == "call_w1"
        assert (call.function.name, json.loads(call.function.arguments)) == (
            "get_weather",
            {"city": "Paris"},
        )
        # The host runs the tool and sends the list on, as it would to OpenAI.
        done = c.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "user", "content": "What is the weather in Paris?"},
                choice.message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"},
            ],
            user="ann",
            tools=[WEATHER_TOOL],
            extra_headers={"X-Contextd-Session": session_id},
        )
    assert done.choices[0].message.content == "the tool said: sunny, 21 C"
    assert done.choices[0].finish_reason == "stop"
    roles = [m.message.role for m in served.messages("ann", session_id)]
    assert roles == [2, 3, 4, 3]  # user, assistant (the call), tool, assistant


def test_host_tool_calls_stream_as_openai_streams_them(served: Served) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "weather please"}],
        "user": "ann",
        "tools": [WEATHER_TOOL],
    }
    chunks, last = sse_chunks(served, body)
    assert last == "[DONE]"
    calls = [
        c["choices"][0]["delta"]["tool_calls"]
        for c in chunks
        if c["choices"] and c["choices"][0]["delta"].get("tool_calls")
    ]
    assert calls == [
        [
            {
                "index": 0,
                "id": "call_w1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ]
    ]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_model_options_reach_the_provider(served: Served) -> None:
    with client(served) as c:
        answer = c.chat.completions.create(
            model="another-model",
            messages=[{"role": "user", "content": "Options"}],
            user="ann",
            temperature=0.25,
            max_completion_tokens=42,
            stop=["END"],
            seed=7,  # a hint: accepted, without effect
        )
    assert answer.model == "another-model"
    sent = served.model.chat_requests()[-1]
    assert sent["model"] == "another-model"
    assert sent["temperature"] == 0.25
    assert 42 in (sent.get("max_tokens"), sent.get("max_completion_tokens"))
    assert sent["stop"] == ["END"]
    assert "seed" not in sent


def test_an_image_part_reaches_the_provider(served: Served) -> None:
    data = base64.b64encode(png()).decode()
    with client(served) as c:
        answer = c.chat.completions.create(
            model=MODEL,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {
                            "type": "image_url",
                            "image_url": {"url": f"data:image/png;base64,{data}"},
                        },
                    ],
                }
            ],
            user="ann",
        )
    assert answer.choices[0].message.content == "fake answer to: What is this?"
    [text, image] = served.model.chat_requests()[-1]["messages"][-1]["content"]
    assert text == {"type": "text", "text": "What is this?"}
    assert image["image_url"]["url"] == f"data:image/png;base64,{data}"


def test_a_provider_failure_is_an_error_the_sdk_raises(served: Served) -> None:
    with client(served) as c:
        with pytest.raises(openai.APIStatusError) as failed:
            c.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "fail now"}], user="ann"
            )
        assert failed.value.status_code == 502
        assert failed.value.type == "api_error"
        # Inline: each attempt is a turn of its own, so a retry is allowed.
        assert failed.value.response.headers["x-should-retry"] == "true"
        stream = c.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "fail later"}],
            user="ann",
            stream=True,
        )
        with pytest.raises(openai.APIError):
            list(stream)


def test_a_failed_session_turn_is_not_retried(served: Served) -> None:
    """The SDK retries 5xx answers, but a session turn stored its message: contextd says
    x-should-retry: false, so the turn is not sent again."""
    with client(served, max_retries=2) as c:
        created = c.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hello"}],
            user="ann",
            extra_headers={"X-Contextd-Session": "new"},
        )
        session_id = created.headers["x-contextd-session-id"]
        with pytest.raises(openai.APIStatusError) as failed:
            c.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "fail once"}],
                user="ann",
                extra_headers={"X-Contextd-Session": session_id},
            )
    assert failed.value.response.headers["x-should-retry"] == "false"
    users = [m for m in served.messages("ann", session_id) if m.message.role == 2]
    assert [m.message.content for m in users] == ["hello", "fail once"]

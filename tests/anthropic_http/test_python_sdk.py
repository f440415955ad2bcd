"""The official ``anthropic`` Python SDK (sync, async, streaming helpers) pointed at
contextd's /v1/messages: inline turns, session turns, host tools, images, count_tokens
and errors, each answer checked against the SDK's own types; an OpenAI-compatible model
runs every turn."""

from __future__ import annotations

import base64
import json
from typing import Any

import anthropic
import httpx
import pytest
from anthropic.types import Message, RawMessageStreamEvent
from contextd.v1 import context_pb2 as pb
from pydantic import TypeAdapter

from tests.anthropic_http.conftest import MODEL, VERSION, base_url
from tests.openai_http.conftest import Served
from tests.support.fake_openai_model import WEATHER_CALL
from tests.support.images import png

WEATHER_TOOL: Any = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
EVENT = TypeAdapter(RawMessageStreamEvent)


def client(served: Served, max_retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base_url(served), api_key="unused", max_retries=max_retries)


def ask(c: anthropic.Anthropic, user: str, text: str, **extra: Any) -> Message:
    return c.messages.create(
        model=MODEL,
        max_tokens=200,
        messages=[{"role": "user", "content": text}],
        metadata={"user_id": user},
        **extra,
    )


def events(served: Served, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A streamed request's events as sent: (event name, data)."""
    with (
        httpx.Client(timeout=30) as http,
        http.stream(
            "POST",
            f"{base_url(served)}/v1/messages",
            json={**body, "stream": True},
            headers={"x-api-key": "unused", **VERSION},
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    names = [line[7:] for line in lines if line.startswith("event: ")]
    data = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert len(names) == len(data)
    return list(zip(names, data, strict=True))


def test_an_inline_turn_with_the_sync_client(served: Served) -> None:
    with client(served) as c:
        raw = c.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=200,
            system=[{"type": "text", "text": "You are terse."}],
            messages=[
                {"role": "user", "content": "Earlier question"},
                {"role": "assistant", "content": [{"type": "text", "text": "Earlier answer"}]},
                {"role": "user", "content": "Hi there"},
            ],
            metadata={"user_id": "ann"},
        )
    answer = Message.model_validate(raw.http_response.json())
    assert answer.type == "message" and answer.id.startswith("msg_")
    assert answer.content[0].type == "text"
    assert answer.content[0].text == "fake answer to: Hi there"
    assert answer.stop_reason == "end_turn" and answer.model == MODEL
    # The fake's usage: 11 prompt tokens, 3 of them read from the cache.
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (8, 7)
    assert answer.usage.cache_read_input_tokens == 3
    assert raw.headers["request-id"] == answer.id
    extension = raw.http_response.json()["contextd"]
    assert extension["mode"] == "inline" and extension["status"] == "ok"
    assert raw.headers["x-contextd-session-id"] == extension["session_id"]
    summary = json.loads(raw.headers["x-contextd-report"])
    assert summary["history_kept"] == extension["report"]["history_kept"] == 2
    sent = served.model.chat_requests()[-1]["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("system", "You are terse."),
        ("user", "Earlier question"),
        ("assistant", "Earlier answer"),
        ("user", "Hi there"),
    ]


def test_the_stream_helper_gives_the_text_and_the_final_message(served: Served) -> None:
    with (
        client(served) as c,
        c.messages.stream(
            model=MODEL,
            max_tokens=100,
            messages=[{"role": "user", "content": "Stream please"}],
            metadata={"user_id": "ann"},
        ) as stream,
    ):
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(pieces) == 3 and "".join(pieces) == "fake answer to: Stream please"
    assert final.content[0].type == "text" and final.content[0].text == "".join(pieces)
    assert final.stop_reason == "end_turn"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (8, 7)


def test_the_events_as_sent_fit_the_sdk_types(served: Served) -> None:
    sent = events(
        served,
        {
            "model": MODEL,
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "Events"}],
            "metadata": {"user_id": "ann"},
        },
    )
    names = [name for name, _ in sent]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        *["content_block_delta"] * 3,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    for name, data in sent:
        # ping is not among the SDK's event types: it skips it.
        assert name == "ping" or EVENT.validate_python(data).type == name
    assert sent[-2][1]["delta"]["stop_reason"] == "end_turn"
    assert sent[-2][1]["usage"]["output_tokens"] == 7


async def test_the_async_client_streams_too(served: Served) -> None:
    async with anthropic.AsyncAnthropic(
        base_url=base_url(served), api_key="unused", max_retries=0
    ) as c:
        stream = await c.messages.create(
            model=MODEL,
            max_tokens=50,
            messages=[{"role": "user", "content": "Async"}],
            metadata={"user_id": "ann"},
            stream=True,
        )
        kinds = [event.type async for event in stream]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"


def test_session_mode_sends_only_the_new_message(served: Served) -> None:
    with client(served) as c:
        first = c.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=50,
            messages=[{"role": "user", "content": "I am vegetarian."}],
            metadata={"user_id": "sam"},
            extra_headers={"X-Contextd-Session": "new"},
        )
        session = first.headers["x-contextd-session-id"]
        second = c.messages.create(
            model=MODEL,
            max_tokens=50,
            messages=[
                {"role": "user", "content": "ignored: the session holds the history"},
                {"role": "assistant", "content": "ignored too"},
                {"role": "user", "content": "Suggest a dinner."},
            ],
            metadata={"user_id": "sam", "contextd_session": session},  # type: ignore[typeddict-unknown-key]
        )
    extension = second.model_extra["contextd"] if second.model_extra else {}
    assert extension["mode"] == "session" and extension["session_id"] == session
    assert extension["turn_index"] == 2
    stored = [m.message.content for m in served.messages("sam", session)]
    assert stored == [
        "I am vegetarian.",
        "fake answer to: I am vegetarian.",
        "Suggest a dinner.",
        "fake answer to: Suggest a dinner.",
    ]


def test_host_tools_end_the_turn_and_their_results_continue_the_session(served: Served) -> None:
    call_id, name, arguments = WEATHER_CALL
    with client(served) as c:
        raw = c.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=100,
            tools=[WEATHER_TOOL],
            tool_choice={"type": "auto"},
            messages=[{"role": "user", "content": "What is the weather?"}],
            metadata={"user_id": "tia"},
            extra_headers={"X-Contextd-Session": "new"},
        )
        first = raw.parse()
        assert first.stop_reason == "tool_use"
        [use] = [b for b in first.content if b.type == "tool_use"]
        assert (use.id, use.name, use.input) == (call_id, name, json.loads(arguments))
        offered = served.model.chat_requests()[-1]["tools"]
        assert "get_weather" in [t["function"]["name"] for t in offered]
        second = c.messages.create(
            model=MODEL,
            max_tokens=100,
            tools=[WEATHER_TOOL],
            messages=[
                {"role": "user", "content": "What is the weather?"},
                {"role": "assistant", "content": first.content},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}],
                },
            ],
            metadata={"user_id": "tia"},
            extra_headers={"X-Contextd-Session": raw.headers["x-contextd-session-id"]},
        )
    assert second.content[0].type == "text"
    assert second.content[0].text == "the tool said: sunny"


def test_text_beside_tool_results_is_stored_after_them_in_session_mode(served: Served) -> None:
    with client(served) as c:
        raw = c.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=100,
            tools=[WEATHER_TOOL],
            tool_choice={"type": "any"},
            messages=[{"role": "user", "content": "What is the weather?"}],
            metadata={"user_id": "tib"},
            extra_headers={"X-Contextd-Session": "new"},
        )
        session = raw.headers["x-contextd-session-id"]
        [use] = [b for b in raw.parse().content if b.type == "tool_use"]
        second = c.messages.create(
            model=MODEL,
            max_tokens=100,
            tools=[WEATHER_TOOL],
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "In Celsius, please."},
                        {"type": "tool_result", "tool_use_id": use.id, "content": "sunny, 20"},
                    ],
                },
            ],
            metadata={"user_id": "tib", "contextd_session": session},  # type: ignore[typeddict-unknown-key]
        )
    assert second.content[0].text == "fake answer to: In Celsius, please."
    sent = served.model.chat_requests()[-1]["messages"]
    assert [(m["role"], m.get("content")) for m in sent[-2:]] == [
        ("tool", "sunny, 20"),
        ("user", "In Celsius, please."),
    ]
    stored = served.messages("tib", session)
    assert [(m.message.role, m.message.content) for m in stored][1:] == [
        (pb.ROLE_ASSISTANT, ""),
        (pb.ROLE_TOOL, "sunny, 20"),
        (pb.ROLE_USER, "In Celsius, please."),
        (pb.ROLE_ASSISTANT, "fake answer to: In Celsius, please."),
    ]
    extension = second.model_extra["contextd"]  # type: ignore[index]
    assert extension["user_message_id"] == stored[3].message.id
    # One turn: the results continue it, the text is part of it.
    assert {m.turn_index for m in stored} == {1}


def test_streamed_tool_use_is_whole_blocks(served: Served) -> None:
    with (
        client(served) as c,
        c.messages.stream(
            model=MODEL,
            max_tokens=100,
            tools=[WEATHER_TOOL],
            messages=[{"role": "user", "content": "weather in the stream?"}],
            metadata={"user_id": "tia"},
        ) as stream,
    ):
        final = stream.get_final_message()
    [use] = [b for b in final.content if b.type == "tool_use"]
    assert use.input == {"city": "Paris"} and final.stop_reason == "tool_use"


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ({"type": "none"}, "none"),
        ({"type": "any"}, "required"),
        (
            {"type": "tool", "name": "get_weather"},
            {"type": "function", "function": {"name": "get_weather"}},
        ),
    ],
    ids=["none", "any", "tool"],
)
def test_tool_choice_reaches_the_provider(served: Served, choice: Any, sent: Any) -> None:
    with client(served) as c:
        ask(c, "tia", "choose", tools=[WEATHER_TOOL], tool_choice=choice)
    body = served.model.chat_requests()[-1]
    assert body["tool_choice"] == sent
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"]
    assert "parallel_tool_calls" not in body


def test_disable_parallel_tool_use_reaches_the_provider(served: Served) -> None:
    with client(served) as c:
        choice: Any = {"type": "auto", "disable_parallel_tool_use": True}
        ask(c, "tia", "one at a time", tools=[WEATHER_TOOL], tool_choice=choice)
    assert served.model.chat_requests()[-1]["parallel_tool_calls"] is False


def test_a_stateless_tool_loop_goes_on_after_the_tool_results(served: Served) -> None:
    """The host sends its whole list back each step, as the SDKs' tool runners do."""
    messages: Any = [{"role": "user", "content": "What is the weather?"}]
    with client(served) as c:
        first = c.messages.create(
            model=MODEL,
            max_tokens=100,
            tools=[WEATHER_TOOL],
            messages=messages,
            metadata={"user_id": "loop"},
        )
        [use] = [b for b in first.content if b.type == "tool_use"]
        messages += [
            # The answer's blocks with every field the SDK holds, None ones included.
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}],
            },
        ]
        second = c.messages.create(
            model=MODEL,
            max_tokens=100,
            tools=[WEATHER_TOOL],
            messages=messages,
            metadata={"user_id": "loop"},
        )
    assert second.stop_reason == "end_turn"
    assert second.content[0].type == "text" and second.content[0].text == "the tool said: sunny"
    sent = served.model.chat_requests()[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["id"] == use.id


def test_structured_output_reaches_the_provider(served: Served) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    with client(served) as c:
        ask(c, "so", "a city", output_config={"format": {"type": "json_schema", "schema": schema}})
    sent = served.model.chat_requests()[-1]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["schema"] == schema


def test_model_options_reach_the_provider(served: Served) -> None:
    with client(served) as c:
        ask(
            c,
            "opt",
            "options",
            stop_sequences=["END", "STOP"],
            extra_body={"temperature": 0.5, "top_k": 5},
        )
    sent = served.model.chat_requests()[-1]
    assert sent["stop"] == ["END", "STOP"] and sent["temperature"] == 0.5
    assert sent["max_tokens"] == 200 or sent.get("max_completion_tokens") == 200


def test_an_image_block_reaches_the_provider(served: Served) -> None:
    data = base64.b64encode(png()).decode()
    with client(served) as c:
        c.messages.create(
            model=MODEL,
            max_tokens=50,
            metadata={"user_id": "img"},
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": data},
                        },
                    ],
                }
            ],
        )
    parts = served.model.chat_requests()[-1]["messages"][-1]["content"]
    assert parts[0] == {"type": "text", "text": "What is this?"}
    assert parts[1]["image_url"]["url"] == f"data:image/png;base64,{data}"


def test_count_tokens_counts_system_messages_and_tools(served: Served) -> None:
    messages: Any = [{"role": "user", "content": "Count me, please."}]
    with client(served) as c:
        bare = c.messages.count_tokens(model=MODEL, messages=messages)
        more = c.messages.count_tokens(
            model=MODEL, messages=messages, system="You are terse.", tools=[WEATHER_TOOL]
        )
    assert 0 < bare.input_tokens < more.input_tokens


def test_a_bad_request_is_the_sdks_bad_request_error(served: Served) -> None:
    with client(served) as c, pytest.raises(anthropic.BadRequestError) as refused:
        c.messages.create(
            model=MODEL,
            max_tokens=0,
            messages=[{"role": "user", "content": "x"}],
            metadata={"user_id": "ann"},
        )
    body: Any = refused.value.body
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("max_tokens:")


def test_an_unknown_session_is_the_sdks_not_found_error(served: Served) -> None:
    with client(served) as c, pytest.raises(anthropic.NotFoundError) as missing:
        ask(c, "ann", "hi", extra_headers={"X-Contextd-Session": "0" * 32})
    body: Any = missing.value.body
    assert body["error"]["type"] == "not_found_error"


def test_a_provider_failure_is_an_error_the_sdk_raises(served: Served) -> None:
    with client(served) as c:
        with pytest.raises(anthropic.APIStatusError) as failed:
            ask(c, "ann", "fail now")
        assert failed.value.status_code == 502
        with (
            pytest.raises(anthropic.APIStatusError) as in_stream,
            c.messages.stream(
                model=MODEL,
                max_tokens=10,
                messages=[{"role": "user", "content": "fail in a stream"}],
                metadata={"user_id": "ann"},
            ) as stream,
        ):
            stream.until_done()
    body: Any = in_stream.value.body
    assert body["error"]["type"] == "api_error"


def test_a_missing_version_header_is_refused(served: Served) -> None:
    answer = httpx.post(
        f"{base_url(served)}/v1/messages",
        json={"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
        headers={"x-api-key": "unused"},
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "anthropic-version: header is required"


def test_system_messages_in_the_list_join_the_system_prompt(served: Served) -> None:
    with client(served) as c:
        answer = c.beta.messages.create(
            model=MODEL,
            max_tokens=50,
            system="You are terse.",
            messages=[
                {"role": "user", "content": "First."},
                {
                    "role": "system",
                    "content": "Only for the first.",
                    "clear_at": "next_user_message",
                },
                {"role": "assistant", "content": "Done."},
                {"role": "system", "content": [{"type": "text", "text": "Always."}]},
                {"role": "user", "content": "Second."},
                {"role": "system", "content": "For this one.", "clear_at": "next_user_message"},
            ],
            metadata={"user_id": "sys"},
        )
    assert answer.content[0].type == "text"
    assert answer.content[0].text == "fake answer to: Second."
    sent = served.model.chat_requests()[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "You are terse.\nAlways.\nFor this one."}
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "user"]

"""The Responses API (POST /v1/responses, GET and DELETE /v1/responses/{id}) with the
official ``openai`` Python SDK: inline and stored responses, the stream's semantic
events, function tools and their outputs, previous_response_id and conversation
continuing a contextd session, store false, and errors in the API's shape."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response

from tests.openai_http.conftest import MODEL, Served
from tests.openai_http.test_python_sdk import client
from tests.support.images import png

WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def test_an_inline_response(served: Served) -> None:
    with client(served) as c:
        raw = c.responses.with_raw_response.create(
            model=MODEL, input="Hello there", instructions="Be terse.", user="rita"
        )
    answer = Response.model_validate(raw.http_response.json())
    assert answer.id.startswith("resp_") and answer.status == "completed"
    assert answer.output_text == "fake answer to: Hello there"
    assert answer.usage is not None and answer.usage.input_tokens == 11
    assert answer.usage.input_tokens_details.cached_tokens == 3
    sent = served.model.chat_requests()[-1]["messages"]
    assert sent == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "Hello there"},
    ]


def test_a_streamed_response_sends_the_semantic_events(served: Served) -> None:
    with client(served) as c:
        events = list(c.responses.create(model=MODEL, input="Stream it", user="rita", stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.output_item.added" in kinds and "response.output_text.done" in kinds
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "fake answer to: Stream it"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    done = events[-1].response  # type: ignore[union-attr]
    assert done.output_text == "fake answer to: Stream it"


def test_the_stream_helper_gives_the_final_response(served: Served) -> None:
    with (
        client(served) as c,
        c.responses.stream(model=MODEL, input="Helper", user="rita") as stream,
    ):
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert text == final.output_text == "fake answer to: Helper"


def test_a_stateless_function_call_loop(served: Served) -> None:
    with client(served) as c:
        first = c.responses.create(
            model=MODEL, input="weather in Paris?", tools=[WEATHER], user="rita", store=False
        )
        [call] = [item for item in first.output if item.type == "function_call"]
        assert (call.name, call.arguments, call.call_id) == (
            "get_weather",
            '{"city": "Paris"}',
            "call_w1",
        )
        second = c.responses.create(
            model=MODEL,
            input=[
                {"role": "user", "content": "weather in Paris?"},
                *[item.model_dump(exclude_none=True) for item in first.output],
                {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
            ],
            tools=[WEATHER],
            user="rita",
            store=False,
        )
        assert second.output_text == "the tool said: sunny"
        sent = served.model.chat_requests()[-1]["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
        # Not stored: neither can be retrieved.
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(second.id)


def test_previous_response_id_continues_the_session(served: Served) -> None:
    with client(served) as c:
        first = c.responses.create(
            model=MODEL, input="weather please", tools=[WEATHER], user="rita"
        )
        [call] = [item for item in first.output if item.type == "function_call"]
        second = c.responses.create(
            model=MODEL,
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "rainy"}],
            tools=[WEATHER],
        )
        assert second.output_text == "the tool said: rainy"
        third = c.responses.create(
            model=MODEL, previous_response_id=second.id, input="thanks", tools=[WEATHER]
        )
        assert third.output_text == "fake answer to: thanks"
        session = (third.model_extra or {})["contextd"]["session_id"]
        assert (first.model_extra or {})["contextd"]["session_id"] == session
        # Each is retrieved as it was answered.
        got = c.responses.retrieve(first.id)
        assert [i.type for i in got.output] == ["function_call"]
        assert c.responses.retrieve(second.id).output_text == "the tool said: rainy"
        assert c.responses.retrieve(third.id).output_text == "fake answer to: thanks"
        # The same session by its id, as a conversation.
        fourth = c.responses.create(
            model=MODEL, conversation=session, input="and again?", user="rita"
        )
        assert (fourth.model_extra or {})["contextd"]["session_id"] == session
        roles = [m.message.role for m in served.messages("rita", session)]
        assert roles == [2, 3, 4, 3, 2, 3, 2, 3]
        deleted = c.responses.with_raw_response.delete(first.id).http_response.json()
        assert deleted == {"id": first.id, "object": "response", "deleted": True}
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(third.id)  # the whole conversation went


def test_an_image_input(served: Served) -> None:
    data = base64.b64encode(png()).decode()
    with client(served) as c:
        answer = c.responses.create(
            model=MODEL,
            user="rita",
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is this?"},
                        {"type": "input_image", "image_url": f"data:image/png;base64,{data}"},
                    ],
                }
            ],
        )
    assert answer.output_text == "fake answer to: What is this?"
    content = served.model.chat_requests()[-1]["messages"][-1]["content"]
    assert content[1]["image_url"]["url"] == f"data:image/png;base64,{data}"


def test_tool_choice_and_text_format_reach_the_provider(served: Served) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    with client(served) as c:
        c.responses.create(
            model=MODEL,
            input="hi",
            user="rita",
            tools=[WEATHER],
            tool_choice={"type": "function", "name": "get_weather"},
            parallel_tool_calls=False,
            text={"format": {"type": "json_schema", "name": "A", "schema": schema, "strict": True}},
        )
    body = served.model.chat_requests()[-1]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["parallel_tool_calls"] is False
    assert body["response_format"]["json_schema"] == {"name": "A", "schema": schema, "strict": True}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": MODEL, "input": "x", "frobnicate": 1}, "frobnicate"),
        ({"model": MODEL, "input": []}, "input"),
        ({"model": MODEL, "input": [{"type": "web_search_call"}]}, "input[0].type"),
        ({"model": MODEL, "input": [{"role": "assistant", "content": "x"}]}, "input[0]"),
        ({"model": MODEL, "input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        (
            {"model": MODEL, "input": "x", "previous_response_id": "resp_nope"},
            "previous_response_id",
        ),
        ({"model": MODEL, "input": "x", "background": True}, "background"),
        ({"model": MODEL, "input": "x", "text": {"format": {"type": "yaml"}}}, "text.format.type"),
        (
            {"model": MODEL, "input": "x", "conversation": "c", "store": False},
            "store",
        ),
    ],
)
def test_a_bad_request_is_a_400_in_the_apis_shape(
    served: Served, body: dict[str, Any], param: str
) -> None:
    response = httpx.post(f"{served.base_url}/responses", json={**body, "user": "rita"}, timeout=30)
    assert response.status_code in (400, 404), response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param


def test_an_unknown_response_is_404(served: Served) -> None:
    with client(served) as c:
        for wrong in ("resp_nope", "resp_" + "A" * 40, "nothing"):
            with pytest.raises(openai.NotFoundError):
                c.responses.retrieve(wrong)
        with pytest.raises(openai.NotFoundError):
            c.responses.delete("resp_nope")


def test_a_response_of_another_user_is_not_theirs(served: Served) -> None:
    with client(served) as c:
        mine = c.responses.create(model=MODEL, input="mine", user="rita")
    session = (mine.model_extra or {})["contextd"]["session_id"]
    forged = json.dumps(["mallory", session, 1, ""]).encode()
    other = "resp_" + base64.urlsafe_b64encode(forged).decode().rstrip("=")
    response = httpx.get(f"{served.base_url}/responses/{other}", timeout=30)
    assert response.status_code == 404

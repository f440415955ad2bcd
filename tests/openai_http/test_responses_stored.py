"""``GET /v1/responses/{id}`` gives the response as it was answered: its model, usage,
instructions, tools, tool_choice, text.format, sampling options, metadata, status and
creation time, kept with the stored answer; after a streamed answer and a whole one,
on SQLite and on PostgreSQL. ``DELETE`` then ``GET`` is 404 in the API's error shape,
and a ``store: false`` response was never there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.openai_http.conftest import MODEL, Served, openai_args
from tests.openai_http.test_responses import WEATHER
from tests.support.fake_openai_model import rule_model
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.pg_databases import database_url_for
from tests.support.server import start_server

FORMAT = {
    "type": "json_schema",
    "name": "City",
    "schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
ASKED: dict[str, Any] = {
    "instructions": "You are terse.",
    "tools": [WEATHER],
    "tool_choice": "auto",
    "text": {"format": FORMAT},
    "temperature": 0.25,
    "top_p": 0.5,
    "max_output_tokens": 300,
    "metadata": {"ticket": "T-7"},
    "parallel_tool_calls": False,
}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with rule_model() as model:
        proc = start_server(
            tmp_path_factory.mktemp(f"responses-{request.param}"),
            *openai_args(model),
            env={"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
            database_url=database_url_for(request, request.param),
        )
        try:
            yield Served(proc, model)
        finally:
            assert proc.stop() == 0
        errors = [e for e in proc.log_lines if e.get("level") == "ERROR"]
        assert not errors, json.dumps(errors)


def client(served: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.base_url, api_key="unused", max_retries=0)


def _same(retrieved: dict[str, Any], answered: dict[str, Any]) -> None:
    """What a retrieved response repeats of the one answered."""
    for key in (
        "id",
        "object",
        "status",
        "model",
        "instructions",
        "tools",
        "tool_choice",
        "text",
        "temperature",
        "top_p",
        "max_output_tokens",
        "metadata",
        "parallel_tool_calls",
        "store",
        "user",
    ):
        assert retrieved[key] == answered[key], key
    assert retrieved["usage"] == answered["usage"]
    assert retrieved["created_at"] == answered["created_at"]
    assert [item["type"] for item in retrieved["output"]] == [
        item["type"] for item in answered["output"]
    ]
    texts = [
        part["text"]
        for item in answered["output"]
        if item["type"] == "message"
        for part in item["content"]
    ]
    assert [
        part["text"]
        for item in retrieved["output"]
        if item["type"] == "message"
        for part in item["content"]
    ] == texts


def test_a_whole_response_is_retrieved_as_it_was(served: Served) -> None:
    with client(served) as c:
        answered = c.responses.create(model=MODEL, input="Hello", user="gil", **ASKED)
        retrieved = c.responses.retrieve(answered.id)
    whole = answered.model_dump(mode="json")
    again = retrieved.model_dump(mode="json")
    _same(again, whole)
    assert again["usage"]["input_tokens"] == 11 and again["usage"]["output_tokens"] == 7
    assert again["usage"]["input_tokens_details"]["cached_tokens"] == 3
    assert again["instructions"] == "You are terse."
    assert again["text"]["format"]["name"] == "City"
    assert again["metadata"] == {"ticket": "T-7"}
    assert again["model"] == MODEL and again["status"] == "completed"


def test_a_streamed_response_is_retrieved_as_it_was(served: Served) -> None:
    with (
        client(served) as c,
        c.responses.stream(model=MODEL, input="Stream it", user="gil", **ASKED) as stream,
    ):
        answered = stream.get_final_response()
    with client(served) as c:
        retrieved = c.responses.retrieve(answered.id)
    _same(retrieved.model_dump(mode="json"), answered.model_dump(mode="json"))
    assert retrieved.output_text == "fake answer to: Stream it"


def test_a_function_call_response_and_the_one_after_its_output(served: Served) -> None:
    with client(served) as c:
        called = c.responses.create(
            model=MODEL, input="weather in Paris?", tools=[WEATHER], user="gil"
        )
        [call] = [item for item in called.output if item.type == "function_call"]
        after = c.responses.create(
            model=MODEL,
            previous_response_id=called.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
            tools=[WEATHER],
            temperature=0.5,
            user="gil",
        )
        for answered in (called, after):
            retrieved = c.responses.retrieve(answered.id)
            _same(retrieved.model_dump(mode="json"), answered.model_dump(mode="json"))
    assert retrieved.previous_response_id == called.id and retrieved.temperature == 0.5


def test_delete_then_get_is_404(served: Served) -> None:
    with client(served) as c:
        answered = c.responses.create(model=MODEL, input="Forget me", user="gil")
        deleted = c.responses.delete(answered.id)
        assert deleted is None  # the SDK returns nothing for a deletion
        with pytest.raises(openai.NotFoundError) as missing:
            c.responses.retrieve(answered.id)
        with pytest.raises(openai.NotFoundError):
            c.responses.delete(answered.id)
    raw = httpx.get(f"{served.base_url}/responses/{answered.id}", timeout=30)
    assert raw.status_code == 404
    assert raw.json() == {
        "error": {
            "message": "No response with that id.",
            "type": "invalid_request_error",
            "param": None,
            "code": "not_found",
        }
    }
    assert missing.value.code == "not_found"


def test_an_unstored_response_is_404(served: Served) -> None:
    with client(served) as c:
        answered = c.responses.create(model=MODEL, input="Keep nothing", user="gil", store=False)
        assert answered.store is False
        raw = httpx.get(f"{served.base_url}/responses/{answered.id}", timeout=30)
    assert raw.status_code == 404
    assert raw.json()["error"]["code"] == "not_found"

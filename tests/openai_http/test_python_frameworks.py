"""The Python clients people point at /v1, against the offline echo model: the openai
SDK's ``parse`` helpers with pydantic models (Chat Completions and Responses) and its
streaming helper, and LangChain's ChatOpenAI: ``with_structured_output`` by each of its
three methods, a tool-calling loop with no session, and the Responses API."""

from __future__ import annotations

from typing import Any

import openai
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

USER = "frameworks"


class Trip(BaseModel):
    """A trip to plan."""

    city: str = Field(min_length=3)
    days: int = Field(ge=2, le=9)
    sights: list[str]
    budget: float | None


class Echoed(BaseModel):
    echo: str


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def get_time(zone: str, twelve_hour: bool) -> str:
    """The time in a time zone."""
    return f"noon in {zone}"


def sdk(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="unused", max_retries=0)


def chat_model(url: str, **options: Any) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=url,
        api_key="unused",
        model="echo",
        max_retries=0,
        model_kwargs={"user": USER},
        **options,
    )


def test_chat_completions_parse_with_a_pydantic_model(echo_url: str) -> None:
    with sdk(echo_url) as c:
        done = c.chat.completions.parse(
            model="echo",
            messages=[{"role": "user", "content": "Plan a trip"}],
            response_format=Trip,
            user=USER,
        )
    trip = done.choices[0].message.parsed
    assert isinstance(trip, Trip) and len(trip.city) >= 3 and 2 <= trip.days <= 9


def test_responses_parse_with_a_pydantic_model(echo_url: str) -> None:
    with sdk(echo_url) as c:
        done = c.responses.parse(model="echo", input="Plan a trip", text_format=Trip, user=USER)
    assert isinstance(done.output_parsed, Trip)


def test_the_chat_stream_helper(echo_url: str) -> None:
    with (
        sdk(echo_url) as c,
        c.chat.completions.stream(
            model="echo", messages=[{"role": "user", "content": "Hi"}], user=USER
        ) as stream,
    ):
        pieces = [e.delta for e in stream if e.type == "content.delta"]
        final = stream.get_final_completion()
    assert "".join(pieces) == final.choices[0].message.content
    assert final.choices[0].message.content.startswith("echo: I received 1 message ")


def test_with_structured_output_by_each_method(echo_url: str) -> None:
    model = chat_model(echo_url)
    for method in ("json_schema", "function_calling"):
        trip = model.with_structured_output(Trip, method=method).invoke("Plan a trip")
        assert isinstance(trip, Trip), method
    echoed = model.with_structured_output(Echoed, method="json_mode").invoke("Answer in JSON")
    assert isinstance(echoed, Echoed) and echoed.echo.startswith("echo: I received 1 message ")


def test_a_tool_loop_with_no_session(echo_url: str) -> None:
    tools = {t.name: t for t in (get_weather, get_time)}
    first = chat_model(echo_url).bind_tools(list(tools.values()), tool_choice="required")
    messages: list[Any] = [HumanMessage("What is the weather and the time?")]
    called = first.invoke(messages)
    assert sorted(c["name"] for c in called.tool_calls) == ["get_time", "get_weather"]
    messages.append(called)
    for call in called.tool_calls:
        result = tools[call["name"]].invoke(call["args"])
        messages.append(ToolMessage(result, tool_call_id=call["id"]))
    # The whole history goes back, ending with the results: the model's next step.
    answer = chat_model(echo_url).bind_tools(list(tools.values())).invoke(messages)
    assert not answer.tool_calls
    assert str(answer.content).startswith("echo: I received 4 messages ")


def test_chat_openai_on_the_responses_api(echo_url: str) -> None:
    model = chat_model(echo_url, use_responses_api=True)
    answer = model.invoke("Hello via responses")
    assert answer.text.startswith("echo: I received 1 message ")
    called = model.bind_tools([get_weather], tool_choice="get_weather").invoke("Weather?")
    assert [c["name"] for c in called.tool_calls] == ["get_weather"]
    trip = model.with_structured_output(Trip, method="json_schema").invoke("Plan a trip")
    assert isinstance(trip, Trip)

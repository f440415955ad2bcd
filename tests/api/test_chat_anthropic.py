"""StreamChat through a real contextd process talking to a fake Anthropic Messages server."""

from __future__ import annotations

import json
from typing import Any

import grpc
import grpc.aio
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb

from tests.support.chat_live import (
    WEATHER,
    WEATHER_ARGS,
    Live,
    completed,
    deltas,
    exported,
    new_user,
    request,
    run_turn,
    stored,
    weather_call_reply,
    wire,
)
from tests.support.fakes import anthropic_sse as an
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.fakes.llm_server import (
    StreamReply,
)

# -- Anthropic ----------------------------------------------------------------


async def test_anthropic_text_turn(anthropic_live: Live) -> None:
    live, fake = anthropic_live, anthropic_live.fake
    user = new_user()
    n = len(fake.requests)
    fake.script(
        an.text_reply(["Bonjour", " Alice"], input_tokens=33, output_tokens=3),
        an.text_reply(["Encore"], input_tokens=50, output_tokens=1),
    )
    events = await run_turn(live, request(user, "Hi, I am Alice"))
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_OK and done.final_text == "Bonjour Alice"
    assert [d.text for d in deltas(events)] == ["Bonjour", " Alice"]
    assert (done.turn_usage.prompt_tokens, done.turn_usage.completion_tokens) == (33, 3)
    assert events[0].turn_started.provider == "anthropic"
    sid = events[0].turn_started.session_id
    second = await run_turn(live, request(user, "Again", sid))
    assert completed(second).session_usage.prompt_tokens == 83
    request0 = fake.requests[n]
    assert request0.path == "/v1/messages"
    headers = request0.headers
    assert FAKE_KEY in (headers.get("x-api-key"), headers.get("authorization", "")[7:])
    body = fake.bodies()[n + 1]
    assert body["model"] == "claude-test" and body["stream"] is True
    assert body["system"] and "helpful assistant" in json.dumps(body["system"])
    assert all(m["role"] != "system" for m in body["messages"])
    assert [wire(m) for m in body["messages"]] == [
        ("user", "Hi, I am Alice"),
        ("assistant", "Bonjour Alice"),
        ("user", "Again"),
    ]


async def test_anthropic_tool_use_turn(anthropic_live: Live) -> None:
    live, fake = anthropic_live, anthropic_live.fake
    user = new_user()
    n = len(fake.requests)
    fake.script(
        StreamReply(
            [
                an.message_start(20),
                *an.text_block(0, ["Let me check."]),
                *an.tool_use_block(1, "toolu_1", "get_weather", WEATHER_ARGS),
                an.message_delta("tool_use", 12),
                an.message_stop(),
            ]
        ),
        an.text_reply(["Sunny."], input_tokens=60, output_tokens=2),
    )
    first = await run_turn(live, request(user, "Weather in Paris?", tools=[WEATHER]))
    done = completed(first)
    assert done.status == cpb.TURN_STATUS_REQUIRES_ACTION
    assert [(c.id, c.name, c.arguments) for c in done.pending_tool_calls] == [
        ("toolu_1", "get_weather", WEATHER_ARGS)
    ]
    assert [t["name"] for t in fake.bodies()[n]["tools"]] == ["get_weather", "memory_search"]
    assert fake.bodies()[n]["tools"][0]["input_schema"]["required"] == ["city"]
    sid = first[0].turn_started.session_id
    second = await run_turn(
        live,
        request(
            user,
            session_id=sid,
            tools=[WEATHER],
            tool_results=[cpb.ToolResult(tool_call_id="toolu_1", content="sunny, 21 C")],
        ),
    )
    assert completed(second).status == cpb.TURN_STATUS_OK
    body = fake.bodies()[n + 1]
    assert "system" in body and all(m["role"] != "system" for m in body["messages"])
    assistant, result = body["messages"][-2], body["messages"][-1]
    assert assistant["role"] == "assistant"
    assert {"type": "text", "text": "Let me check."} in assistant["content"]
    assert {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "get_weather",
        "input": json.loads(WEATHER_ARGS),
    } in assistant["content"]
    assert result["role"] == "user"
    assert result["content"][0]["type"] == "tool_result"
    assert result["content"][0]["tool_use_id"] == "toolu_1"
    assert "sunny, 21 C" in json.dumps(result["content"][0])


async def test_a_continuation_refused_for_the_prompt_limit_stores_nothing(
    openai_live: Live,
) -> None:
    """The host's tool results are stored only once the turn's context fits: refused,
    the same results can be sent again (they are still pending)."""
    live, fake = openai_live, openai_live.fake
    user = new_user()
    fake.script(weather_call_reply("call_r1"))
    first = await run_turn(live, request(user, "Weather in Oslo?", tools=[WEATHER]))
    assert completed(first).status == cpb.TURN_STATUS_REQUIRES_ACTION
    sid = first[0].turn_started.session_id
    before, events_before = await stored(live, user, sid), await exported(live, user, sid)
    long_result = " ".join(["cloudy with rain showers and a strong westerly wind"] * 40)

    def continuation(**extra: Any) -> Any:
        results = [cpb.ToolResult(tool_call_id="call_r1", content=long_result)]
        return request(user, session_id=sid, tools=[WEATHER], tool_results=results, **extra)

    n = len(fake.requests)
    refuse = cpb.PROMPT_LIMIT_POLICY_REFUSE
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await run_turn(live, continuation(token_budget=200, prompt_limit_policy=refuse))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert len(fake.requests) == n  # the model was not called
    assert await stored(live, user, sid) == before
    assert await exported(live, user, sid) == events_before

    fake.script(oa.text_reply(["Take a coat."]))
    events = await run_turn(live, continuation())
    assert completed(events).status == cpb.TURN_STATUS_OK
    assert events[0].turn_started.turn_index == 1  # the same turn, continued
    messages = await stored(live, user, sid)
    assert [m.message.role for m in messages[len(before) :]] == [pb.ROLE_TOOL, pb.ROLE_ASSISTANT]

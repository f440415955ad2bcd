"""StreamChat through a real contextd process talking to a fake OpenAI server: text
turns, host tools, the server-side memory_search tool.

One fake LLM server and one ``contextd serve --provider ...`` process per module
(fixtures in conftest.py); each test scripts the fake's next replies and reads what it
received. Every gRPC call is async: the fake runs in the tests' own event loop.
"""

from __future__ import annotations

import json

import grpc
import grpc.aio
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb

from tests.support.chat_live import (
    SISTER,
    WEATHER,
    WEATHER_ARGS,
    Live,
    add_memories,
    check_event_shape,
    completed,
    deltas,
    exported,
    kinds,
    memory_call_reply,
    memory_lines,
    new_user,
    request,
    run_turn,
    stored,
    weather_call_reply,
    wire,
)
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.status import violations

# Each test runs against a server on SQLite and one on PostgreSQL.
pytestmark = pytest.mark.both_backends

# -- text streaming, usage, assembled messages ----------------------------


async def test_text_turns_stream_in_order_and_reconcile_usage(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    first_n = len(fake.requests)
    fake.script(
        oa.text_reply(["Hello", ", ", "Alice", "!"], usage=(57, 4)),
        oa.text_reply(["Your name ", "is Alice."], usage=(80, 5)),
    )
    first = await run_turn(live, request(user, "Hi, I am Alice"))
    names = kinds(first)
    assert names[0] == "turn_started" and names[-1] == "turn_completed"
    assert [d.text for d in deltas(first)] == ["Hello", ", ", "Alice", "!"]
    assert all(d.step == 0 for d in deltas(first))
    started, done = first[0].turn_started, completed(first)
    assert started.provider == "openai" and started.model == "gpt-test"
    assert started.turn_index == 1 and started.user_message_id
    assert done.status == cpb.TURN_STATUS_OK and done.error_message == ""
    assert done.final_text == "Hello, Alice!" and done.assistant_message_id
    # Usage: the provider's figures next to contextd's own estimate.
    [usage] = [e.usage for e in first if e.WhichOneof("event") == "usage"]
    assert (usage.usage.prompt_tokens, usage.usage.completion_tokens) == (57, 4)
    assert usage.usage.prompt_tokens_estimate == started.prompt_tokens_estimate > 0
    assert done.turn_usage.prompt_tokens == 57 and done.turn_usage.completion_tokens == 4
    assert done.turn_usage.prompt_tokens_estimate == started.prompt_tokens_estimate
    assert done.step_usage == done.turn_usage
    assert done.session_usage == done.turn_usage

    sid = started.session_id
    second = await run_turn(live, request(user, "What is my name?", sid))
    done2 = completed(second)
    assert second[0].turn_started.turn_index == 2
    assert done2.status == cpb.TURN_STATUS_OK and done2.final_text == "Your name is Alice."
    assert done2.turn_usage.prompt_tokens == 80 and done2.turn_usage.completion_tokens == 5
    total = done2.session_usage
    assert (total.prompt_tokens, total.completion_tokens) == (57 + 80, 4 + 5)
    assert total.prompt_tokens_estimate == (
        started.prompt_tokens_estimate + second[0].turn_started.prompt_tokens_estimate
    )

    # What the provider received: system first, then the conversation.
    bodies = fake.bodies()[first_n:]
    assert len(bodies) == 2
    for body in bodies:
        assert body["stream"] is True and body["model"] == "gpt-test"
        assert body["stream_options"] == {"include_usage": True}
        assert body["messages"][0]["role"] == "system"
        assert [t["function"]["name"] for t in body["tools"]] == ["memory_search"]
    assert fake.requests[first_n].headers["authorization"] == f"Bearer {FAKE_KEY}"
    assert [wire(m) for m in bodies[0]["messages"][1:]] == [("user", "Hi, I am Alice")]
    assert [wire(m) for m in bodies[1]["messages"][1:]] == [
        ("user", "Hi, I am Alice"),
        ("assistant", "Hello, Alice!"),
        ("user", "What is my name?"),
    ]
    messages = await stored(live, user, sid)
    assert [(m.message.role, m.message.content, m.turn_index, m.status) for m in messages] == [
        (pb.ROLE_USER, "Hi, I am Alice", 1, ""),
        (pb.ROLE_ASSISTANT, "Hello, Alice!", 1, ""),
        (pb.ROLE_USER, "What is my name?", 2, ""),
        (pb.ROLE_ASSISTANT, "Your name is Alice.", 2, ""),
    ]
    events = await exported(live, user, sid)
    check_event_shape(events, sid)
    assert [e["type"] for e in events] == [
        "session_start",
        "turn_start",
        "assistant",
        "final",
        "turn_end",
        "turn_start",
        "assistant",
        "final",
        "turn_end",
    ]
    assert events[0]["meta"]["provider"] == "openai" and events[0]["meta"]["model"] == "gpt-test"
    assert events[2]["meta"]["tokens"] == {"prompt": 57, "completion": 4, "total": 61}
    assert events[4]["meta"]["tokens"] == {"prompt": 57, "completion": 4, "total": 61}


# -- host-side tools ----------------------------------------------------------


async def test_host_tool_call_and_results_continue_the_turn(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    n = len(fake.requests)
    fake.script(weather_call_reply("call_w1"), oa.text_reply(["It is ", "sunny in Paris."]))
    first = await run_turn(live, request(user, "Weather in Paris?", tools=[WEATHER]))
    done = completed(first)
    [call_event] = [e.tool_call for e in first if e.WhichOneof("event") == "tool_call"]
    assert call_event.step == 0
    assert (call_event.call.id, call_event.call.name) == ("call_w1", "get_weather")
    assert call_event.call.arguments == WEATHER_ARGS  # reassembled from 6 fragments
    assert done.status == cpb.TURN_STATUS_REQUIRES_ACTION
    assert [(c.id, c.name, c.arguments) for c in done.pending_tool_calls] == [
        ("call_w1", "get_weather", WEATHER_ARGS)
    ]
    assert done.assistant_message_id and done.turn_usage.prompt_tokens == 40
    sent_tools = fake.bodies()[n]["tools"]
    assert [t["function"]["name"] for t in sent_tools] == ["get_weather", "memory_search"]
    assert sent_tools[0]["function"]["parameters"]["required"] == ["city"]
    sid = first[0].turn_started.session_id

    # An unknown call id is refused before anything is stored.
    before = await stored(live, user, sid)
    events_before = await exported(live, user, sid)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await run_turn(
            live,
            request(
                user,
                session_id=sid,
                tools=[WEATHER],
                tool_results=[cpb.ToolResult(tool_call_id="call_nope", content="x")],
            ),
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "tool_results[0].tool_call_id" in violations(err.value)
    assert len(fake.requests) == n + 1  # the model was not called
    assert await stored(live, user, sid) == before
    assert await exported(live, user, sid) == events_before

    second = await run_turn(
        live,
        request(
            user,
            session_id=sid,
            tools=[WEATHER],
            tool_results=[cpb.ToolResult(tool_call_id="call_w1", content="sunny, 21 C")],
        ),
    )
    done2 = completed(second)
    assert done2.status == cpb.TURN_STATUS_OK and done2.final_text == "It is sunny in Paris."
    started2 = second[0].turn_started
    assert started2.session_id == sid and started2.user_message_id == ""
    assert started2.turn_index == 1  # the same turn, continued
    body = fake.bodies()[n + 1]
    msgs = body["messages"]
    assert msgs[0]["role"] == "system"
    assert wire(msgs[1]) == ("user", "Weather in Paris?")
    assert msgs[2]["role"] == "assistant"
    assert msgs[2]["tool_calls"] == [
        {
            "id": "call_w1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": WEATHER_ARGS},
        }
    ]
    assert msgs[3] == {"role": "tool", "tool_call_id": "call_w1", "content": "sunny, 21 C"}
    assert len(msgs) == 4

    # The same results again: the call is answered already.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await run_turn(
            live,
            request(
                user,
                session_id=sid,
                tool_results=[cpb.ToolResult(tool_call_id="call_w1", content="again")],
            ),
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "tool_results[0].tool_call_id" in violations(err.value)

    messages = await stored(live, user, sid)
    assert [(m.message.role, m.turn_index) for m in messages] == [
        (pb.ROLE_USER, 1),
        (pb.ROLE_ASSISTANT, 1),
        (pb.ROLE_TOOL, 1),
        (pb.ROLE_ASSISTANT, 1),
    ]
    assert messages[2].message.tool_call_id == "call_w1"
    events = await exported(live, user, sid)
    check_event_shape(events, sid)
    # The continued turn counts on: the result is the step of its call, the answer the next.
    assert [(e["type"], e.get("step")) for e in events] == [
        ("session_start", None),
        ("turn_start", None),
        ("assistant", 0),
        ("action", 0),
        ("turn_end", None),
        ("turn_start", None),
        ("observation", 0),
        ("assistant", 1),
        ("final", 1),
        ("turn_end", None),
    ]
    assert {d.step for d in deltas(second)} == {1}
    assert [e.usage.step for e in second if e.WhichOneof("event") == "usage"] == [1]
    assert events[4]["meta"]["stepCount"] == 1 and events[9]["meta"]["stepCount"] == 2
    # turn_start counts the input it brings, the prompt's estimate is beside it.
    assert events[1]["meta"]["tokens"]["prompt"] < first[0].turn_started.prompt_tokens_estimate
    assert 0 < events[5]["meta"]["tokens"]["prompt"] < started2.prompt_tokens_estimate
    action, observation = events[3], events[6]
    assert action["meta"]["tool"] == "get_weather" and action["meta"]["input"] == WEATHER_ARGS
    assert observation["content"] == "sunny, 21 C"
    assert observation["meta"]["tool"] == "get_weather"
    assert events[4]["meta"]["status"] == "requires_action"
    assert events[9]["meta"]["status"] == "ok"


async def test_a_user_message_beside_the_results_is_read_and_stored_after_them(
    openai_live: Live,
) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    fake.script(weather_call_reply("call_w2"), oa.text_reply(["21 degrees."]))
    first = await run_turn(live, request(user, "Weather in Paris?", tools=[WEATHER]))
    sid = first[0].turn_started.session_id
    n = len(fake.requests)
    second = await run_turn(
        live,
        request(
            user,
            "In Celsius, please.",
            session_id=sid,
            tools=[WEATHER],
            tool_results=[cpb.ToolResult(tool_call_id="call_w2", content="sunny, 21 C")],
        ),
    )
    assert completed(second).final_text == "21 degrees."
    started = second[0].turn_started
    assert started.turn_index == 1  # the same turn, continued
    msgs = fake.bodies()[n]["messages"]
    assert msgs[-2] == {"role": "tool", "tool_call_id": "call_w2", "content": "sunny, 21 C"}
    assert wire(msgs[-1]) == ("user", "In Celsius, please.")
    messages = await stored(live, user, sid)
    assert [(m.message.role, m.message.content, m.turn_index) for m in messages][2:] == [
        (pb.ROLE_TOOL, "sunny, 21 C", 1),
        (pb.ROLE_USER, "In Celsius, please.", 1),
        (pb.ROLE_ASSISTANT, "21 degrees.", 1),
    ]
    assert started.user_message_id == messages[3].message.id
    events = await exported(live, user, sid)
    start = [e for e in events if e["type"] == "turn_start"][-1]
    assert start["content"] == "In Celsius, please." and start["meta"]["continuing"] is True


# -- the server-side memory_search tool --------------------------------------


async def test_memory_search_runs_server_side_in_a_second_step(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    added = await live.memories.AddMemory(
        mpb.AddMemoryRequest(user_id=user, content="The user's favourite drink is oolong tea")
    )
    assert added.created
    n = len(fake.requests)
    fake.script(
        memory_call_reply("favourite drink", "call_m1"),
        oa.text_reply(["You like ", "oolong tea."], usage=(90, 6)),
    )
    events = await run_turn(live, request(user, "What do I like to drink?"))
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_OK, done.error_message
    assert done.final_text == "You like oolong tea."
    assert done.pending_tool_calls == []
    [call] = [e.tool_call for e in events if e.WhichOneof("event") == "tool_call"]
    assert call.step == 0 and call.call.name == "memory_search"
    assert {d.step for d in deltas(events)} == {1}
    usages = [e.usage for e in events if e.WhichOneof("event") == "usage"]
    assert [(u.step, u.usage.prompt_tokens) for u in usages] == [(0, 30), (1, 90)]
    assert done.turn_usage.prompt_tokens == 120 and done.turn_usage.completion_tokens == 15
    assert done.step_usage.prompt_tokens == 90

    # Step 1's request carries the call and its result.
    second = fake.bodies()[n + 1]["messages"]
    assert second[-2]["role"] == "assistant"
    assert second[-2]["tool_calls"][0]["function"]["name"] == "memory_search"
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "call_m1"
    assert "oolong tea" in second[-1]["content"]

    sid = events[0].turn_started.session_id
    lines = await live.history_lines(sid)
    log = [json.loads(line) for line in lines]
    check_event_shape(log, sid)
    assert log == await exported(live, user, sid)
    # The documented event sequence of a turn, line by line.
    turn = log[1:]
    assert [(e["type"], e.get("step")) for e in turn] == [
        ("turn_start", None),
        ("assistant", 0),
        ("action", 0),
        ("observation", 0),
        ("assistant", 1),
        ("final", 1),
        ("turn_end", None),
    ]
    assert all(e["turn"] == 1 for e in turn)
    start, step0, action, observation, step1, final, end = turn
    assert start["content"] == "What do I like to drink?" and start["role"] == "user"
    # The user message's estimate, not the whole prompt's.
    assert 0 < start["meta"]["tokens"]["prompt"] < events[0].turn_started.prompt_tokens_estimate
    assert step0["role"] == "assistant"
    assert step0["meta"]["tokens"] == {"prompt": 30, "completion": 9, "total": 39}
    assert action["meta"]["tool"] == "memory_search"
    assert json.loads(action["meta"]["input"]) == {"query": "favourite drink"}
    assert observation["meta"]["tool"] == "memory_search"
    assert "oolong tea" in observation["content"]
    assert step1["content"] == "You like oolong tea."
    assert step1["meta"]["tokens"] == {"prompt": 90, "completion": 6, "total": 96}
    assert final["content"] == "You like oolong tea." and final["role"] == "assistant"
    assert final["meta"]["tokens"] == {"prompt": 120, "completion": 15, "total": 135}
    assert end["meta"]["status"] == "ok" and end["meta"]["stepCount"] == 2
    assert end["meta"]["tokens"] == {"prompt": 120, "completion": 15, "total": 135}
    assert "content" not in end and "step" not in end

    messages = await stored(live, user, sid)
    assert [m.message.role for m in messages] == [
        pb.ROLE_USER,
        pb.ROLE_ASSISTANT,
        pb.ROLE_TOOL,
        pb.ROLE_ASSISTANT,
    ]
    assert messages[-1].message.content == "You like oolong tea."


async def test_repeated_memory_search_stops_at_max_steps(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    n = len(fake.requests)
    fake.script(memory_call_reply("anything"), repeat_last=True)
    events = await run_turn(live, request(user, "Loop forever"))
    done = completed(events)
    fake.script()
    assert done.status == cpb.TURN_STATUS_MAX_STEPS
    assert len(fake.requests) - n == 100  # --max-steps default, the specification's
    steps = sorted({e.tool_call.step for e in events if e.WhichOneof("event") == "tool_call"})
    assert steps == list(range(100))
    sid = events[0].turn_started.session_id
    log = await exported(live, user, sid)
    check_event_shape(log, sid)
    end = log[-1]
    assert end["type"] == "turn_end" and end["meta"]["status"] == "max_steps"
    assert end["meta"]["stepCount"] == 100
    # The next turn still builds a valid context (the last call has no result).
    fake.script(oa.text_reply(["Fine."]))
    after = await run_turn(live, request(user, "Stop it", sid))
    assert completed(after).status == cpb.TURN_STATUS_OK
    for message in fake.bodies()[-1]["messages"]:
        if message.get("tool_calls"):
            answered = {m.get("tool_call_id") for m in fake.bodies()[-1]["messages"]}
            assert {c["id"] for c in message["tool_calls"]} <= answered


async def test_memory_layer_follows_the_question_after_a_memory_search(
    openai_live: Live,
) -> None:
    """The step after the server's memory_search recalls what the user asked about."""
    live, fake = openai_live, openai_live.fake
    user = new_user()
    kayak = "The user paddles a red kayak on weekends"
    await add_memories(live, user, SISTER, kayak)
    n = len(fake.requests)
    fake.script(memory_call_reply("kayak"), oa.text_reply(["In Lisbon."]))
    events = await run_turn(live, request(user, "Where does my sister live?"))
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_OK, done.error_message
    first, second = fake.bodies()[n], fake.bodies()[n + 1]
    assert second["messages"][-1]["role"] == "tool"
    assert kayak in second["messages"][-1]["content"]  # the search found the kayak
    assert memory_lines(first) == [f"- {SISTER}"]
    assert memory_lines(second) == [f"- {SISTER}"]


async def test_memory_layer_follows_the_question_after_the_hosts_results(
    openai_live: Live,
) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    jacket = "The user keeps a rain jacket for windy days"
    await add_memories(live, user, SISTER, jacket)
    n = len(fake.requests)
    fake.script(weather_call_reply("call_w9"), oa.text_reply(["Take the rain jacket."]))
    question = "What should I pack to visit my sister?"
    first = await run_turn(live, request(user, question, tools=[WEATHER]))
    assert completed(first).status == cpb.TURN_STATUS_REQUIRES_ACTION
    sid = first[0].turn_started.session_id
    result = cpb.ToolResult(tool_call_id="call_w9", content="rain, windy, 12 C")
    second = await run_turn(
        live, request(user, session_id=sid, tools=[WEATHER], tool_results=[result])
    )
    assert completed(second).status == cpb.TURN_STATUS_OK
    continued = fake.bodies()[n + 1]
    assert wire(continued["messages"][1]) == ("user", question)
    assert memory_lines(fake.bodies()[n]) == [f"- {SISTER}"]
    assert memory_lines(continued) == [f"- {SISTER}"]

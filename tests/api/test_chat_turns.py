"""StreamChat through a real contextd process talking to the fake OpenAI / Anthropic servers.

One fake LLM server and one ``contextd serve --provider ...`` process per provider
(module fixtures); each test scripts the fake's next replies and reads what it
received. Every gRPC call is async: the fake runs in the tests' own event loop.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb

from tests.support.chat_live import (
    BIG,
    SISTER,
    WEATHER,
    Live,
    add_memories,
    anthropic_fake,
    check_seed_shape,
    completed,
    deltas,
    eventually,
    exported,
    kinds,
    memory_lines,
    new_user,
    openai_fake,
    request,
    run_turn,
    stored,
    wire,
)
from tests.support.fakes import anthropic_sse as an
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.fakes.llm_server import (
    FakeLLMServer,
    JSONReply,
    StreamReply,
    sse,
)
from tests.support.server import start_server
from tests.support.status import violations

WEATHER_ARGS = '{"city": "Paris", "unit": "celsius"}'


@pytest.fixture(scope="module")
async def openai_live(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Live]:
    fake = openai_fake()
    async with fake:
        proc = start_server(
            tmp_path_factory.mktemp("chat-openai"),
            *("--provider", "openai", "--provider-base-url", fake.url),
            *("--provider-model", "gpt-test", "--provider-timeout", "10"),
            env={"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
        )
        try:
            async with grpc.aio.insecure_channel(proc.address, options=BIG) as channel:
                yield Live(
                    fake,
                    proc,
                    chat_pb2_grpc.ChatServiceStub(channel),
                    sessions_pb2_grpc.SessionServiceStub(channel),
                    memory_pb2_grpc.MemoryServiceStub(channel),
                )
        finally:
            # In a thread: the fake, in this loop, must keep serving the server's
            # background model calls while it shuts down.
            assert await asyncio.to_thread(proc.stop) == 0
        assert not any(FAKE_KEY in json.dumps(line) for line in proc.log_lines), "key in logs"


@pytest.fixture(scope="module")
async def anthropic_live(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Live]:
    fake = anthropic_fake()
    async with fake:
        proc = start_server(
            tmp_path_factory.mktemp("chat-anthropic"),
            *("--provider", "anthropic", "--provider-base-url", fake.url),
            *("--provider-model", "claude-test", "--provider-timeout", "10"),
            env={"CONTEXTD_ANTHROPIC_API_KEY": FAKE_KEY},
        )
        try:
            async with grpc.aio.insecure_channel(proc.address, options=BIG) as channel:
                yield Live(
                    fake,
                    proc,
                    chat_pb2_grpc.ChatServiceStub(channel),
                    sessions_pb2_grpc.SessionServiceStub(channel),
                    memory_pb2_grpc.MemoryServiceStub(channel),
                )
        finally:
            # In a thread: the fake, in this loop, must keep serving the server's
            # background model calls while it shuts down.
            assert await asyncio.to_thread(proc.stop) == 0


# -- helpers -------------------------------------------------------------------


def weather_call_reply(call_id: str = "call_w1") -> StreamReply:
    return StreamReply(
        oa.tool_call_frames([(call_id, "get_weather", WEATHER_ARGS)], pieces=6, usage=(40, 25))
    )


def memory_call_reply(query: str, call_id: str = "call_m1") -> StreamReply:
    args = json.dumps({"query": query})
    return StreamReply(oa.tool_call_frames([(call_id, "memory_search", args)], usage=(30, 9)))


# -- 1. text streaming, usage, assembled messages ----------------------------


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
    check_seed_shape(events, sid)
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


# -- 2. host-side tools ----------------------------------------------------------


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
    check_seed_shape(events, sid)
    assert [e["type"] for e in events] == [
        "session_start",
        "turn_start",
        "assistant",
        "action",
        "turn_end",
        "turn_start",
        "observation",
        "assistant",
        "final",
        "turn_end",
    ]
    action, observation = events[3], events[6]
    assert action["meta"]["tool"] == "get_weather" and action["meta"]["input"] == WEATHER_ARGS
    assert observation["content"] == "sunny, 21 C"
    assert observation["meta"]["tool"] == "get_weather"
    assert events[4]["meta"]["status"] == "requires_action"
    assert events[9]["meta"]["status"] == "ok"


# -- 3. the server-side memory_search tool --------------------------------------


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
    lines = live.history_file(sid).read_text(encoding="utf-8").splitlines()
    log = [json.loads(line) for line in lines]
    check_seed_shape(log, sid)
    assert log == await exported(live, user, sid)
    # Seed 003, line by line.
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
    assert start["meta"]["tokens"]["prompt"] == events[0].turn_started.prompt_tokens_estimate
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
    assert len(fake.requests) - n == 4  # --max-steps default
    assert sorted({e.tool_call.step for e in events if e.WhichOneof("event") == "tool_call"}) == [
        0,
        1,
        2,
        3,
    ]
    sid = events[0].turn_started.session_id
    log = await exported(live, user, sid)
    check_seed_shape(log, sid)
    end = log[-1]
    assert end["type"] == "turn_end" and end["meta"]["status"] == "max_steps"
    assert end["meta"]["stepCount"] == 4
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


# -- 4. cancel and deadline mid-stream ------------------------------------------


def slow_text(pieces: list[str], delay: float) -> StreamReply:
    frames = oa.text_frames(pieces)
    return StreamReply(frames, frame_delay=delay)


async def wait_disconnects(fake: FakeLLMServer, count: int, within: float) -> float:
    deadline = time.monotonic() + within
    while len(fake.disconnects) < count:
        assert time.monotonic() < deadline, "the provider stream was not closed"
        await asyncio.sleep(0.01)
    return fake.disconnects[count - 1].at


async def check_interrupted(live: Live, user: str, sid: str, text: str, status: str) -> None:
    async def partial() -> Any:
        messages = await stored(live, user, sid)
        return messages if len(messages) == 2 else None

    messages = await eventually(partial)
    assert messages, "the partial answer was not stored"
    assert [(m.message.role, m.status) for m in messages] == [
        (pb.ROLE_USER, ""),
        (pb.ROLE_ASSISTANT, status),
    ]
    assert messages[1].message.content == text

    async def ended() -> Any:
        events = await exported(live, user, sid)
        return events if events and events[-1]["type"] == "turn_end" else None

    events = await eventually(ended)
    assert events, "no turn_end in the event log"
    check_seed_shape(events, sid)
    assert events[-1]["meta"]["status"] == status
    assert [e["type"] for e in events] == ["session_start", "turn_start", "turn_end"]
    # The interrupted call's prompt was sent: the turn counts it.
    assert events[-1]["meta"]["tokens"]["prompt"] == events[1]["meta"]["tokens"]["prompt"] > 0


async def test_cancel_after_first_delta_closes_the_provider_stream(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    seen = len(fake.disconnects)
    fake.script(slow_text(["First part.", " Second", " third", " fourth"], 0.4))
    call = live.chat.StreamChat(request(user, "Tell me a long story"))
    got: list[Any] = []
    async for event in call:
        got.append(event)
        if event.WhichOneof("event") == "text_delta":
            cancelled_at = time.monotonic()
            call.cancel()
            break
    assert [d.text for d in deltas(got)] == ["First part."]
    gone = await wait_disconnects(fake, seen + 1, within=3)
    assert gone - cancelled_at < 1.5
    assert fake.disconnects[-1].frames_sent < len(oa.text_frames(["a"] * 4))
    sid = got[0].turn_started.session_id
    await check_interrupted(live, user, sid, "First part.", "cancelled")

    # The next turn on the session builds a valid context and completes.
    n = len(fake.requests)
    fake.script(oa.text_reply(["Short", " one."]))
    after = await run_turn(live, request(user, "Shorter please", sid))
    done = completed(after)
    assert done.status == cpb.TURN_STATUS_OK and done.final_text == "Short one."
    assert after[0].turn_started.turn_index == 2
    assert [wire(m) for m in fake.bodies()[n]["messages"][1:]] == [
        ("user", "Tell me a long story"),
        ("assistant", "First part."),
        ("user", "Shorter please"),
    ]


async def test_deadline_mid_stream_stores_like_a_cancel(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    seen = len(fake.disconnects)
    frames = oa.text_frames(["Partial", " answer"])
    frames = [frames[0], frames[1], sse(oa.chunk({"content": " late"}), delay=30)]
    fake.script(StreamReply(frames))
    got: list[Any] = []
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for event in live.chat.StreamChat(request(user, "Go on"), timeout=1.0):
            got.append(event)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert [d.text for d in deltas(got)] == ["Partial"]
    await wait_disconnects(fake, seen + 1, within=3)
    sid = got[0].turn_started.session_id
    await check_interrupted(live, user, sid, "Partial", "cancelled")


async def test_cancel_while_the_client_is_not_reading(openai_live: Live) -> None:
    """A client that stops reading blocks the server's writes; a cancel then closes the
    turn from its yield (GeneratorExit, not CancelledError)."""
    live, fake = openai_live, openai_live.fake
    user = new_user()
    seen = len(fake.disconnects)
    piece = "z" * 50_000
    fake.script(StreamReply(oa.text_frames([piece] * 400), frame_delay=0.002))
    call = live.chat.StreamChat(request(user, "Flood me"))
    got: list[Any] = []
    async for event in call:
        got.append(event)
        if event.WhichOneof("event") == "text_delta":
            break
    await asyncio.sleep(0.8)  # the windows fill up; the server waits to write
    assert len(fake.disconnects) == seen
    call.cancel()
    await wait_disconnects(fake, seen + 1, within=3)
    sid = got[0].turn_started.session_id

    async def partial() -> Any:
        messages = await stored(live, user, sid)
        return messages if len(messages) == 2 else None

    messages = await eventually(partial)
    assert messages and messages[1].status == "cancelled"
    assert len(messages[1].message.content) >= len(piece)

    async def ended() -> Any:
        events = await exported(live, user, sid)
        return events if events[-1]["type"] == "turn_end" else None

    events = await eventually(ended)
    assert events and events[-1]["meta"]["status"] == "cancelled"


async def test_new_message_instead_of_tool_results(openai_live: Live) -> None:
    """The host may drop pending calls: the unanswered call is not sent to the model."""
    live, fake = openai_live, openai_live.fake
    user = new_user()
    n = len(fake.requests)
    fake.script(weather_call_reply("call_w9"), oa.text_reply(["Sure."]))
    first = await run_turn(live, request(user, "Weather?", tools=[WEATHER]))
    assert completed(first).status == cpb.TURN_STATUS_REQUIRES_ACTION
    sid = first[0].turn_started.session_id
    second = await run_turn(live, request(user, "Never mind, say hi", sid, tools=[WEATHER]))
    assert completed(second).status == cpb.TURN_STATUS_OK
    assert second[0].turn_started.turn_index == 2
    sent = fake.bodies()[n + 1]["messages"]
    assert not any(m.get("tool_calls") for m in sent)
    assert wire(sent[-1]) == ("user", "Never mind, say hi")
    # The dropped call can no longer be answered.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await run_turn(
            live,
            request(
                user,
                session_id=sid,
                tool_results=[cpb.ToolResult(tool_call_id="call_w9", content="late")],
            ),
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# -- 5. provider errors ----------------------------------------------------------


async def test_rejected_key_ends_the_turn_with_a_clean_error(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    fake.script(
        JSONReply(
            401,
            oa.error_body(
                f"Incorrect API key provided: {FAKE_KEY}.",
                "invalid_request_error",
                "invalid_api_key",
            ),
        )
    )
    events = await run_turn(live, request(user, "hello"))
    assert kinds(events) == ["turn_started", "turn_completed"]
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_ERROR
    assert "401" in done.error_message and "openai" in done.error_message
    assert FAKE_KEY not in done.error_message
    assert done.assistant_message_id == "" and done.final_text == ""
    sid = events[0].turn_started.session_id
    log = await exported(live, user, sid)
    check_seed_shape(log, sid)
    assert log[-1]["meta"]["status"] == "error"
    assert FAKE_KEY not in live.history_file(sid).read_text(encoding="utf-8")
    assert [m.message.role for m in await stored(live, user, sid)] == [pb.ROLE_USER]


async def test_rate_limit_error_names_the_retry_delay(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    n = len(fake.requests)
    fake.script(
        JSONReply(
            429,
            oa.error_body("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
            headers={"Retry-After": "7"},
        )
    )
    done = completed(await run_turn(live, request(user, "hello")))
    assert len(fake.requests) == n + 1  # not retried inside the turn
    assert done.status == cpb.TURN_STATUS_ERROR
    assert "429" in done.error_message
    assert "retry after 7" in done.error_message.lower(), done.error_message


async def test_broken_stream_keeps_the_partial_answer(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    frames = oa.text_frames(["Half an ", "answer"])[:3]  # role, two pieces, no finish
    fake.script(StreamReply(frames, ending="abort"))
    events = await run_turn(live, request(user, "hello"))
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_ERROR and done.error_message
    assert [d.text for d in deltas(events)] == ["Half an ", "answer"]
    assert done.final_text == "Half an answer" and done.assistant_message_id
    sid = events[0].turn_started.session_id
    messages = await stored(live, user, sid)
    assert [(m.message.role, m.message.content, m.status) for m in messages] == [
        (pb.ROLE_USER, "hello", ""),
        (pb.ROLE_ASSISTANT, "Half an answer", "error"),
    ]
    assert messages[1].message.id == done.assistant_message_id
    log = await exported(live, user, sid)
    check_seed_shape(log, sid)
    assert log[-1]["meta"]["status"] == "error"
    assert log[-1]["meta"]["errorMessage"] == done.error_message


async def test_error_in_a_later_step_stores_only_that_steps_text(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    look = StreamReply(
        oa.tool_call_frames(
            [("call_m2", "memory_search", '{"query": "x"}')], text_before="Let me look. "
        )
    )
    broken = StreamReply(oa.text_frames(["Half"])[:2], ending="abort")
    fake.script(look, broken)
    events = await run_turn(live, request(user, "hello"))
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_ERROR
    assert [(d.step, d.text) for d in deltas(events)] == [(0, "Let me look. "), (1, "Half")]
    sid = events[0].turn_started.session_id
    messages = await stored(live, user, sid)
    assert [(m.message.role, m.message.content, m.status) for m in messages] == [
        (pb.ROLE_USER, "hello", ""),
        (pb.ROLE_ASSISTANT, "Let me look. ", ""),
        (pb.ROLE_TOOL, "(nothing found)", ""),
        (pb.ROLE_ASSISTANT, "Half", "error"),
    ]
    log = await exported(live, user, sid)
    check_seed_shape(log, sid)
    end = log[-1]
    assert end["meta"]["status"] == "error" and end["meta"]["stepCount"] == 2
    # The failed step's prompt was sent: it counts.
    assert done.turn_usage.prompt_tokens_estimate > done.step_usage.prompt_tokens_estimate > 0
    # The next turn's context is valid.
    fake.script(oa.text_reply(["ok"]))
    assert completed(await run_turn(live, request(user, "again", sid))).status == (
        cpb.TURN_STATUS_OK
    )


# -- 6. Anthropic ----------------------------------------------------------------


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

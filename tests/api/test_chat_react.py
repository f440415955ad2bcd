"""StreamChat with tool_protocol REACT (the ReAct tags) through a real contextd process
talking to the fake OpenAI server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest
from contextd.core.react import REACT_HEADER
from contextd.core.tokens import TokenizerRegistry
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, context_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb

from tests.support.chat_live import (
    BIG,
    SISTER,
    WEATHER,
    Live,
    add_memories,
    check_event_shape,
    completed,
    deltas,
    exported,
    memory_lines,
    new_user,
    request,
    run_turn,
    stored,
    system_text,
    wire,
)
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.fakes.llm_server import FakeLLMServer, RecordedRequest, Reply
from tests.support.server import start_server


def is_react_turn(body: object) -> bool:
    """A ReAct turn's model call: its system message carries the protocol addendum."""
    messages = body.get("messages") if isinstance(body, dict) else None
    return any(
        m.get("role") == "system" and REACT_HEADER in wire(m)[1]
        for m in messages or []
        if isinstance(m, dict)
    )


class ReactFake(FakeLLMServer):
    """Scripted replies go to ReAct turns only; background calls get ``background``."""

    def __init__(self, background: Reply) -> None:
        super().__init__(base_path="/v1")
        self.background = background
        self.background_requests: list[RecordedRequest] = []

    def _next_reply(self) -> Reply:
        if not is_react_turn(self.requests[-1].body):
            self.background_requests.append(self.requests.pop())
            return self.background
        return super()._next_reply()


@pytest.fixture(scope="module")
async def live(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Live]:
    fake = ReactFake(oa.text_reply(['{"facts": []}']))
    async with fake:
        proc = start_server(
            tmp_path_factory.mktemp("chat-react"),
            *("--provider", "openai", "--provider-base-url", fake.url),
            *("--provider-model", "gpt-test", "--provider-timeout", "10"),
            env={"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
        )
        try:
            async with grpc.aio.insecure_channel(proc.address, options=BIG) as channel:
                yield Live(
                    fake,  # type: ignore[arg-type]
                    proc,
                    chat_pb2_grpc.ChatServiceStub(channel),
                    sessions_pb2_grpc.SessionServiceStub(channel),
                    memory_pb2_grpc.MemoryServiceStub(channel),
                )
        finally:
            assert await asyncio.to_thread(proc.stop) == 0


def react_request(user: str, text: str = "", session_id: str = "", **extra: Any) -> Any:
    return request(user, text, session_id, tool_protocol=cpb.TOOL_PROTOCOL_REACT, **extra)


STEP0 = '<thought>I should check what they drink.</thought>\n<action tool="memory_search">coffee'
STEP0_END = "</action>"


async def test_memory_search_in_two_react_steps(live: Live) -> None:
    fake = live.fake
    user = new_user()
    added = await live.memories.AddMemory(
        mpb.AddMemoryRequest(user_id=user, content="The user drinks coffee with oat milk")
    )
    assert added.created
    n = len(fake.requests)
    fake.script(
        oa.text_reply([STEP0[:20], STEP0[20:], STEP0_END], usage=(50, 12)),
        oa.text_reply(["<thought>found it</thought>", "<final>With oat ", "milk.</final>"]),
    )
    events = await run_turn(live, react_request(user, "How do I take my coffee?"))
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_OK, done.error_message
    assert done.final_text == "With oat milk."
    assert done.pending_tool_calls == []
    # Deltas are the model's raw text, tags included, step by step.
    ds = deltas(events)
    assert "".join(d.text for d in ds if d.step == 0) == STEP0 + STEP0_END
    assert "".join(d.text for d in ds if d.step == 1) == (
        "<thought>found it</thought><final>With oat milk.</final>"
    )
    [call] = [e.tool_call for e in events if e.WhichOneof("event") == "tool_call"]
    assert call.step == 0 and call.call.name == "memory_search"
    assert call.call.id.startswith("react_")
    assert json.loads(call.call.arguments) == {"input": "coffee"}

    # No native tools; the protocol is in the system prompt; step 1 sees the observation.
    first, second = fake.bodies()[n], fake.bodies()[n + 1]
    assert len(fake.requests) == n + 2
    assert "tools" not in first and "tools" not in second
    assert "tool_choice" not in first
    # Appended to the context's system message: the protocol comes last.
    assert system_text(first).index(REACT_HEADER) > 0
    assert system_text(first).endswith('"required":["query"]}')
    assert '<action tool="TOOL_NAME">' in system_text(first)
    assert "- memory_search:" in system_text(first)
    assert wire(second["messages"][-2]) == ("assistant", STEP0 + STEP0_END)
    role, content = wire(second["messages"][-1])
    assert role == "user" and content.startswith("<observation>")
    assert "oat milk" in content and content.endswith("</observation>")
    assert not any(m["role"] == "tool" for m in second["messages"])

    sid = events[0].turn_started.session_id
    lines = live.history_file(sid).read_text(encoding="utf-8").splitlines()
    log = [json.loads(line) for line in lines]
    check_event_shape(log, sid)
    assert log == await exported(live, user, sid)
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
    _, step0, action, observation, step1, final, end = turn
    assert step0["content"] == STEP0 + STEP0_END
    assert action["meta"]["tool"] == "memory_search" and action["meta"]["input"] == "coffee"
    assert "content" not in action
    assert observation["meta"] == {"tool": "memory_search"}
    assert "oat milk" in observation["content"]
    assert step1["content"].startswith("<thought>")
    assert final["content"] == "With oat milk." and final["role"] == "assistant"
    assert end["meta"]["status"] == "ok" and end["meta"]["stepCount"] == 2

    messages = await stored(live, user, sid)
    assert [(m.message.role, m.message.content) for m in messages] == [
        (pb.ROLE_USER, "How do I take my coffee?"),
        (pb.ROLE_ASSISTANT, STEP0 + STEP0_END),
        (pb.ROLE_USER, "<observation>- The user drinks coffee with oat milk</observation>"),
        (pb.ROLE_ASSISTANT, "With oat milk."),
    ]
    assert done.assistant_message_id == messages[-1].message.id


async def test_host_tool_action_requires_action_then_continues(live: Live) -> None:
    fake = live.fake
    user = new_user()
    n = len(fake.requests)
    step0 = '<thought>need weather</thought><action tool="get_weather">{"city": "Paris"}</action>'
    fake.script(
        oa.text_reply([step0]),
        oa.text_reply(["<final>Sunny, 21 C in Paris.</final>"]),
    )
    first = await run_turn(live, react_request(user, "Weather in Paris?", tools=[WEATHER]))
    done = completed(first)
    assert done.status == cpb.TURN_STATUS_REQUIRES_ACTION
    [pending] = done.pending_tool_calls
    assert pending.name == "get_weather" and pending.id.startswith("react_")
    assert json.loads(pending.arguments) == {"city": "Paris"}
    [call_event] = [e.tool_call for e in first if e.WhichOneof("event") == "tool_call"]
    assert call_event.call == pending and call_event.step == 0
    body = fake.bodies()[n]
    assert "tools" not in body
    system = system_text(body)
    assert REACT_HEADER in system and "- get_weather: Current weather for a city" in system
    assert '"required":["city"]' in system
    sid = first[0].turn_started.session_id

    # Results for another id are refused; continuing needs the REACT protocol.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await run_turn(
            live,
            react_request(
                user,
                session_id=sid,
                tools=[WEATHER],
                tool_results=[cpb.ToolResult(tool_call_id="react_0", content="x")],
            ),
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert len(fake.requests) == n + 1

    second = await run_turn(
        live,
        react_request(
            user,
            session_id=sid,
            tools=[WEATHER],
            tool_results=[cpb.ToolResult(tool_call_id=pending.id, content="sunny, 21 C")],
        ),
    )
    done2 = completed(second)
    assert done2.status == cpb.TURN_STATUS_OK, done2.error_message
    assert done2.final_text == "Sunny, 21 C in Paris."
    assert second[0].turn_started.turn_index == 1
    cont = fake.bodies()[n + 1]
    assert "tools" not in cont
    assert wire(cont["messages"][-2]) == ("assistant", step0)
    assert wire(cont["messages"][-1]) == ("user", "<observation>sunny, 21 C</observation>")

    # The same call cannot be answered twice.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await run_turn(
            live,
            react_request(
                user,
                session_id=sid,
                tool_results=[cpb.ToolResult(tool_call_id=pending.id, content="again")],
            ),
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    messages = await stored(live, user, sid)
    assert [(m.message.role, m.message.content) for m in messages] == [
        (pb.ROLE_USER, "Weather in Paris?"),
        (pb.ROLE_ASSISTANT, step0),
        (pb.ROLE_USER, "<observation>sunny, 21 C</observation>"),
        (pb.ROLE_ASSISTANT, "Sunny, 21 C in Paris."),
    ]
    assert pending.id == f"react_{messages[1].seq}"
    log = await exported(live, user, sid)
    check_event_shape(log, sid)
    assert [(e["type"], e.get("step")) for e in log[1:]] == [
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
    action = log[3]
    assert action["meta"] == {
        "tool": "get_weather",
        "input": '{"city": "Paris"}',
        "tool_call_id": pending.id,
    }
    assert log[4]["meta"]["status"] == "requires_action"
    assert log[6]["meta"] == {"tool": "get_weather", "tool_call_id": pending.id}
    assert log[6]["content"] == "sunny, 21 C"
    assert log[8]["content"] == "Sunny, 21 C in Paris."


async def test_unknown_tool_gets_an_error_observation(live: Live) -> None:
    fake = live.fake
    user = new_user()
    n = len(fake.requests)
    fake.script(
        oa.text_reply(['<action tool="web_search">news</action>']),
        oa.text_reply(["I cannot search the web."]),  # no tags: the whole text is final
    )
    events = await run_turn(live, react_request(user, "Any news?"))
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_OK, done.error_message
    assert done.final_text == "I cannot search the web."
    assert [e for e in events if e.WhichOneof("event") == "tool_call"] == []
    role, content = wire(fake.bodies()[n + 1]["messages"][-1])
    assert role == "user"
    assert content.startswith("<observation>") and "'web_search' does not exist" in content
    assert "memory_search" in content
    sid = events[0].turn_started.session_id
    log = await exported(live, user, sid)
    check_event_shape(log, sid)
    assert [e["type"] for e in log[1:]] == [
        "turn_start",
        "assistant",
        "action",
        "observation",
        "assistant",
        "final",
        "turn_end",
    ]
    assert log[3]["meta"] == {"tool": "web_search", "input": "news"}
    assert "does not exist" in log[4]["content"]
    assert log[6]["content"] == "I cannot search the web."


async def test_react_steps_stop_at_max_steps(live: Live) -> None:
    fake = live.fake
    user = new_user()
    n = len(fake.requests)
    fake.script(oa.text_reply(['<action tool="memory_search">x</action>']), repeat_last=True)
    events = await run_turn(live, react_request(user, "Loop"))
    fake.script()
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_MAX_STEPS
    assert done.final_text == ""
    assert len(fake.requests) - n == 100  # --max-steps default, the specification's
    log = await exported(live, user, live_sid(events))
    assert log[-1]["meta"]["status"] == "max_steps" and log[-1]["meta"]["stepCount"] == 100


def live_sid(events: list[Any]) -> str:
    return str(events[0].turn_started.session_id)


async def test_native_is_the_default(live: Live) -> None:
    """Without tool_protocol the request offers native tools (the fake's background reply
    answers it, since it has no ReAct addendum)."""
    fake = live.fake
    user = new_user()
    before = len(fake.background_requests)
    events = await run_turn(live, request(user, "Hi"))
    assert completed(events).status == cpb.TURN_STATUS_OK
    body = fake.background_requests[before].body
    assert [t["function"]["name"] for t in body["tools"]] == ["memory_search"]
    assert REACT_HEADER not in system_text(body)


async def test_memory_layer_follows_the_question_after_a_memory_search(live: Live) -> None:
    """The step after an observation recalls what the user asked about, not what the
    observation says."""
    fake = live.fake
    user = new_user()
    kayak = "The user paddles a red kayak on weekends"
    await add_memories(live, user, SISTER, kayak)
    n = len(fake.requests)
    fake.script(
        oa.text_reply(['<action tool="memory_search">kayak</action>']),
        oa.text_reply(["<final>In Lisbon.</final>"]),
    )
    events = await run_turn(live, react_request(user, "Where does my sister live?"))
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_OK, done.error_message
    first, second = fake.bodies()[n], fake.bodies()[n + 1]
    role, content = wire(second["messages"][-1])
    assert role == "user" and kayak in content  # the observation names the kayak
    assert memory_lines(first) == [f"- {SISTER}"]
    assert memory_lines(second) == [f"- {SISTER}"]


async def test_memory_layer_follows_the_question_after_the_hosts_result(live: Live) -> None:
    fake = live.fake
    user = new_user()
    jacket = "The user keeps a rain jacket for windy days"
    await add_memories(live, user, SISTER, jacket)
    n = len(fake.requests)
    fake.script(
        oa.text_reply(['<action tool="get_weather">{"city": "Lisbon"}</action>']),
        oa.text_reply(["<final>Take the rain jacket.</final>"]),
    )
    question = "What should I pack to visit my sister?"
    first = await run_turn(live, react_request(user, question, tools=[WEATHER]))
    [pending] = completed(first).pending_tool_calls
    sid = live_sid(first)
    result = cpb.ToolResult(tool_call_id=pending.id, content="rain, windy, 12 C")
    second = await run_turn(
        live, react_request(user, session_id=sid, tools=[WEATHER], tool_results=[result])
    )
    assert completed(second).status == cpb.TURN_STATUS_OK
    assert memory_lines(fake.bodies()[n]) == [f"- {SISTER}"]
    assert memory_lines(fake.bodies()[n + 1]) == [f"- {SISTER}"]


# -- the prompt budget holds the addendum too -------------------------------------

TOKENIZERS = TokenizerRegistry("cl100k_base")
PACKING = "<final>" + " ".join(f"Tip {k}: roll the shirts, not fold them." for k in range(30))


def sent_tokens(body: dict[str, Any], tokenizer: str) -> int:
    """Tokens of the messages a model call received, counted as the server counts them."""
    tok = TOKENIZERS.get(tokenizer)
    return sum(tok.message_overhead + tok.count(wire(m)[1]) for m in body["messages"])


async def session_with_history(live: Live, user: str) -> str:
    """A ReAct session whose first turn left a long answer in its history."""
    live.fake.script(oa.text_reply([PACKING + "</final>"]))
    events = await run_turn(live, react_request(user, "How do I pack?"))
    assert completed(events).status == cpb.TURN_STATUS_OK
    return live_sid(events)


async def between_budget(live: Live, user: str, sid: str, question: str) -> int:
    """A budget the next turn's context fits whole, but not with the ReAct addendum
    (some 200 tokens)."""
    async with grpc.aio.insecure_channel(live.proc.address) as channel:
        built = await context_pb2_grpc.ContextServiceStub(channel).BuildMessages(
            pb.BuildMessagesRequest(
                session=pb.SessionContext(user_id=user, session_id=sid),
                user_message=question,
                token_budget=100_000,
            )
        )
    assert built.report.history_kept == 2 and not built.report.dropped
    return int(built.report.total_tokens) + 50


async def test_the_context_leaves_room_for_the_addendum(live: Live) -> None:
    fake = live.fake
    user = new_user()
    sid = await session_with_history(live, user)
    question = "And shoes?"
    budget = await between_budget(live, user, sid, question)
    n = len(fake.requests)
    fake.script(
        oa.text_reply(['<action tool="memory_search">shoes</action>']),
        oa.text_reply(["<final>One pair.</final>"]),
    )
    events = await run_turn(live, react_request(user, question, sid, token_budget=budget))
    assert completed(events).status == cpb.TURN_STATUS_OK
    start = events[0].turn_started
    assert start.context.dropped  # the long answer made room for the protocol
    estimates = [e.usage.usage.prompt_tokens_estimate for e in events if e.HasField("usage")]
    assert estimates[0] == start.prompt_tokens_estimate
    bodies = fake.bodies()[n:]
    assert len(bodies) == 2 and all(REACT_HEADER in system_text(b) for b in bodies)
    for body, estimate in zip(bodies, estimates, strict=True):
        assert sent_tokens(body, start.context.tokenizer) == estimate <= budget


async def test_refused_when_the_addendum_does_not_fit(live: Live) -> None:
    fake = live.fake
    user = new_user()
    sid = await session_with_history(live, user)
    question = "And shoes?"
    budget = await between_budget(live, user, sid, question)
    before = await stored(live, user, sid)
    n = len(fake.requests)
    refuse = cpb.PROMPT_LIMIT_POLICY_REFUSE
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await run_turn(
            live,
            react_request(user, question, sid, token_budget=budget, prompt_limit_policy=refuse),
        )
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "with the ReAct instructions does not fit" in (err.value.details() or "")
    assert f"({budget})" in (err.value.details() or "")
    assert len(fake.requests) == n  # the model was not called
    assert await stored(live, user, sid) == before  # nor the question stored

    # Natively (no addendum), the same context fits the same budget.
    fake.script(oa.text_reply(["One pair."]))
    native = await run_turn(
        live, request(user, question, sid, token_budget=budget, prompt_limit_policy=refuse)
    )
    assert completed(native).status == cpb.TURN_STATUS_OK


async def test_an_addendum_over_the_whole_budget(live: Live) -> None:
    """Trimmed, only the required parts go (over the budget, as native turns do);
    refused, nothing does."""
    fake = live.fake
    user = new_user()
    sid = await session_with_history(live, user)
    refuse = cpb.PROMPT_LIMIT_POLICY_REFUSE
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await run_turn(
            live, react_request(user, "Shoes?", sid, token_budget=100, prompt_limit_policy=refuse)
        )
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    n = len(fake.requests)
    fake.script(oa.text_reply(["<final>One pair.</final>"]))
    events = await run_turn(live, react_request(user, "Shoes?", sid, token_budget=100))
    assert completed(events).status == cpb.TURN_STATUS_OK
    start = events[0].turn_started
    assert start.context.required_over_budget and start.context.history_kept == 0
    [body] = fake.bodies()[n:]
    assert sent_tokens(body, start.context.tokenizer) == start.prompt_tokens_estimate > 100

"""Context editing in StreamChat, through a real contextd process and a fake OpenAI
server: an agent loop of host tool calls whose old results are cleared, the stable
prefix between the steps that clear nothing, the cleared result fetched back with
recall_tool_result, and the tool offered only when the turn edits."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb

from tests.support.chat_live import Live, completed, exported, new_user, run_turn
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.llm_server import StreamReply
from tests.support.status import violations

SEARCH = cpb.ToolDefinition(
    name="search",
    description="Search the web",
    parameters_json=json.dumps({"type": "object", "properties": {"q": {"type": "string"}}}),
)
EDITING = pb.ContextEditing(
    tool_result_cap_tokens=600,
    clear_trigger_tokens=1500,
    keep_tool_results=2,
    clear_at_least_tokens=500,
)


def result_text(step: int) -> str:
    """About 400 tokens of search results."""
    return "\n".join(
        json.dumps({"rank": k, "title": f"page {step}.{k}", "url": f"https://x.test/{step}/{k}"})
        for k in range(20)
    )


def call_reply(call_id: str, name: str = "search", args: str = '{"q": "x"}') -> StreamReply:
    return StreamReply(oa.tool_call_frames([(call_id, name, args)], usage=(100, 10)))


def chat_request(user: str, session_id: str = "", **fields: Any) -> cpb.StreamChatRequest:
    return cpb.StreamChatRequest(
        session=pb.SessionContext(
            user_id=user,
            session_id=session_id,
            cache_layout=pb.CACHE_LAYOUT_STABLE_PREFIX,
            memory=pb.MEMORY_MODE_OFF,
        ),
        tools=fields.pop("tools", [SEARCH]),
        tokenizer="cl100k_base",
        token_budget=100_000,
        editing=EDITING,
        **fields,
    )


async def agent_loop(
    live: Live, steps: int
) -> tuple[str, str, list[Any], list[list[dict[str, Any]]]]:
    """A turn of ``steps`` host tool calls and a final answer, by a new user: the user,
    the session, each call's turn_started report, and the messages the model was sent
    each time."""
    fake, user = live.fake, new_user()
    fake.script(*[call_reply(f"call_{k}") for k in range(steps)], oa.text_reply(["done"]))
    first = len(fake.requests)
    events = await run_turn(live, chat_request(user, user_message="research this"))
    sid = events[0].turn_started.session_id
    reports = [events[0].turn_started.context]
    for k in range(steps):
        assert completed(events).status == cpb.TURN_STATUS_REQUIRES_ACTION
        result = cpb.ToolResult(tool_call_id=f"call_{k}", content=result_text(k))
        events = await run_turn(live, chat_request(user, sid, tool_results=[result]))
        reports.append(events[0].turn_started.context)
    assert completed(events).status == cpb.TURN_STATUS_OK
    sent = [r.body["messages"] for r in fake.requests[first:]]
    return user, sid, reports, sent


async def test_old_results_are_cleared_and_the_prefix_holds_between_steps(
    openai_live: Live,
) -> None:
    _, _, reports, sent = await agent_loop(openai_live, 10)
    cleared_at = [
        k for k, r in enumerate(reports) if r.cache_prefix_kept_tokens < _prefix_tokens(r)
    ]
    assert cleared_at, "the history went over the trigger"
    assert len(cleared_at) < len(reports) - 2, "steps that clear nothing keep the prefix"
    for k in range(1, len(sent)):
        before, now = sent[k - 1], sent[k]
        if k in cleared_at:
            # A clearing step: the prefix before its first change still holds.
            same = 0
            while same < len(before) and before[same] == now[same]:
                same += 1
            assert 0 < same < len(before)
        else:
            # Nothing cleared: the last request is a prefix of this one, byte for byte.
            assert now[: len(before)] == before, f"step {k} changed the prefix"
    last = reports[-1]
    kinds = {pb.EditKind.Name(e.kind) for e in last.edits}
    assert kinds == {"EDIT_KIND_CLEARED"}
    cleared_ids = [e.tool_call_id for e in last.edits]
    assert "call_9" not in cleared_ids and "call_8" not in cleared_ids
    contents = {m.get("tool_call_id"): m["content"] for m in sent[-1] if m["role"] == "tool"}
    for call_id in cleared_ids:
        assert contents[call_id].startswith("[tool result cleared to save context: search, ")
    # Every call of the final request still has its result right after it.
    for k, m in enumerate(sent[-1]):
        if m.get("tool_calls"):
            assert sent[-1][k + 1]["tool_call_id"] == m["tool_calls"][0]["id"]


def _prefix_tokens(report: Any) -> int:
    """The system message, summary and history kept: the whole prefix of a list."""
    return int(report.total_tokens - report.user_message_tokens)


async def test_the_model_recalls_a_cleared_result(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user, sid, reports, _ = await agent_loop(live, 8)
    cleared = [e.tool_call_id for e in reports[-1].edits if e.kind == pb.EDIT_KIND_CLEARED]
    wanted = cleared[0]
    fake.script(
        call_reply("call_r", "recall_tool_result", json.dumps({"tool_call_id": wanted})),
        oa.text_reply(["found it"]),
    )
    first = len(fake.requests)
    events = await run_turn(
        live, chat_request(user, sid, user_message="what did the first search say?")
    )
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_OK and done.final_text == "found it"
    offered = [t["function"]["name"] for t in fake.requests[first].body["tools"]]
    assert offered == ["search", "memory_search", "recall_tool_result"]
    # The next step was sent the result as stored, within the cap.
    after = fake.requests[first + 1].body["messages"]
    [recalled] = [m for m in after if m.get("tool_call_id") == "call_r"]
    assert recalled["content"] == result_text(int(wanted.split("_")[1]))
    # Logged like memory_search: an action and its observation.
    log = await exported(live, user, sid)
    actions = [
        e for e in log if e["type"] == "action" and e["meta"]["tool"] == "recall_tool_result"
    ]
    assert len(actions) == 1 and json.loads(actions[0]["meta"]["input"]) == {"tool_call_id": wanted}
    [observed] = [
        e for e in log if e["type"] == "observation" and e["meta"]["tool"] == "recall_tool_result"
    ]
    assert observed["content"] == recalled["content"]


async def test_a_recall_of_an_unknown_call_says_so(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    fake.script(
        call_reply("call_r", "recall_tool_result", '{"tool_call_id": "call_nope"}'),
        oa.text_reply(["ok"]),
    )
    first = len(fake.requests)
    assert completed(await run_turn(live, chat_request(user, user_message="hi"))).final_text == "ok"
    [answer] = [
        m for m in fake.requests[first + 1].body["messages"] if m.get("tool_call_id") == "call_r"
    ]
    assert answer["content"] == "no tool result with call id 'call_nope' in this conversation"


async def test_the_recall_tool_is_offered_only_when_the_turn_edits(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    fake.script(oa.text_reply(["plain"]))
    first = len(fake.requests)
    plain = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=new_user()), user_message="hi", tools=[SEARCH]
    )
    assert completed(await run_turn(live, plain)).status == cpb.TURN_STATUS_OK
    offered = [t["function"]["name"] for t in fake.requests[first].body["tools"]]
    assert offered == ["search", "memory_search"]
    # A host tool of that name is refused only where the server offers its own.
    recall_named = cpb.ToolDefinition(name="recall_tool_result")
    with pytest.raises(grpc.RpcError) as raised:
        await run_turn(live, chat_request(new_user(), user_message="hi", tools=[recall_named]))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "tools[0].name" in violations(raised.value)


async def test_bad_editing_is_named(openai_live: Live) -> None:
    request = chat_request(new_user(), user_message="hi")
    request.editing.tool_result_cap_tokens = 5
    request.editing.exclude_tools.append("bad name")
    with pytest.raises(grpc.RpcError) as raised:
        await run_turn(openai_live, request)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert sorted(violations(raised.value)) == [
        "editing.exclude_tools[0]",
        "editing.tool_result_cap_tokens",
    ]

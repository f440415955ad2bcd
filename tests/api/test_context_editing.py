"""Context editing through the gRPC API: BuildMessages inline and in session mode, each
setting, bad settings named, and the server's defaults (a server of its own)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import sessions_pb2 as spb

from tests.support.server import start_server
from tests.support.status import violations

Stubs = tuple[context_pb2_grpc.ContextServiceStub, sessions_pb2_grpc.SessionServiceStub]


@pytest.fixture(scope="module")
def stubs(address: str) -> Iterator[Stubs]:
    with grpc.insecure_channel(address) as channel:
        yield (
            context_pb2_grpc.ContextServiceStub(channel),
            sessions_pb2_grpc.SessionServiceStub(channel),
        )


def search_result(step: int, lines: int = 60) -> str:
    """A search-like tool result: one JSON object a line."""
    return "\n".join(
        json.dumps({"rank": k, "title": f"result {step}.{k}", "score": 1000 + step * k})
        for k in range(lines)
    )


def agent_history(steps: int, lines: int = 60, tool: str = "search") -> list[pb.Message]:
    """A question, then ``steps`` tool calls each with its result."""
    history = [pb.Message(role=pb.ROLE_USER, content="find the answer")]
    for step in range(steps):
        call = pb.ToolCall(id=f"call_{step}", name=tool, arguments=json.dumps({"q": f"q{step}"}))
        history.append(pb.Message(role=pb.ROLE_ASSISTANT, tool_calls=[call]))
        history.append(
            pb.Message(
                role=pb.ROLE_TOOL, content=search_result(step, lines), tool_call_id=f"call_{step}"
            )
        )
    return history


def build(stubs: Stubs, history: list[pb.Message], **fields: Any) -> pb.BuildMessagesResponse:
    context, _ = stubs
    request = pb.BuildMessagesRequest(
        system_prompts=["You are an agent."],
        history=history,
        token_budget=fields.pop("token_budget", 200_000),
        tokenizer="cl100k_base",
        **fields,
    )
    response: pb.BuildMessagesResponse = context.BuildMessages(request)
    return response


def edits(report: pb.BuildReport) -> list[tuple[int, str, str]]:
    return [(e.index, pb.EditKind.Name(e.kind), e.tool_call_id) for e in report.edits]


def test_a_result_over_the_cap_keeps_its_head_and_tail(stubs: Stubs) -> None:
    history = agent_history(2, lines=300)
    editing = pb.ContextEditing(tool_result_cap_tokens=300)
    response = build(stubs, history, editing=editing)
    tool_messages = [m for m in response.messages if m.role == pb.ROLE_TOOL]
    for message, given in zip(tool_messages, (history[2], history[4]), strict=True):
        assert message.tokens <= 300 + 3  # the cap is on the text; 3: the message's framing
        head, marker, tail = re.split(r"\n(\[\.\.\. .* left out \.\.\.\])\n", message.content)
        # Whole lines on either side: no JSON object cut into a shorter one.
        assert head.endswith("\n") and given.content.startswith(head)
        assert given.content.endswith("\n" + tail)
        for line in (head + tail).splitlines():
            json.loads(line)
        # The marker says what was left out, in tokens and lines.
        left_out = given.content[len(head) : len(given.content) - len(tail)]
        request = pb.CountTokensRequest(tokenizer="cl100k_base", texts=[left_out])
        counted = stubs[0].CountTokens(request).total_tokens
        lines = left_out.count("\n")
        assert marker == f"[... {counted} tokens ({lines} lines) of this tool result left out ...]"
    assert edits(response.report) == [
        (2, "EDIT_KIND_CAPPED", "call_0"),
        (4, "EDIT_KIND_CAPPED", "call_1"),
    ]
    first = response.report.edits[0]
    assert first.tool_name == "search" and first.count == 1
    assert first.tokens_before > 2000 and first.tokens_after == response.messages[3].tokens
    # The same history always gives the same bytes.
    again = build(stubs, history, editing=editing)
    assert again.SerializeToString(deterministic=True) == response.SerializeToString(
        deterministic=True
    )


def test_old_results_are_cleared_beyond_the_newest_ones(stubs: Stubs) -> None:
    history = agent_history(8)
    editing = pb.ContextEditing(
        clear_trigger_tokens=4000, keep_tool_results=2, clear_at_least_tokens=1000
    )
    response = build(stubs, history, editing=editing)
    cleared = [e for e in response.report.edits if e.kind == pb.EDIT_KIND_CLEARED]
    assert cleared, "the history is over the trigger"
    ids = [e.tool_call_id for e in cleared]
    # The oldest first, never the newest two.
    assert ids == [f"call_{k}" for k in range(len(ids))] and "call_6" not in ids
    by_id = {m.tool_call_id: m for m in response.messages if m.role == pb.ROLE_TOOL}
    for e in cleared:
        assert by_id[e.tool_call_id].content == (
            f"[tool result cleared to save context: search, call {e.tool_call_id}, "
            f"{e.tokens_before} tokens]"
        )
        assert e.tokens_after == by_id[e.tool_call_id].tokens < e.tokens_before
    # Every call still has its result right after it.
    for k, m in enumerate(response.messages):
        if m.tool_calls:
            assert response.messages[k + 1].tool_call_id == m.tool_calls[0].id
    # The history is now under the trigger, or no older result is left to clear.
    assert response.report.history_tokens <= 4000 or len(ids) == 6
    # Under the trigger nothing is cleared.
    quiet = build(stubs, history, editing=pb.ContextEditing(clear_trigger_tokens=100_000))
    assert not quiet.report.edits


def test_clear_at_least_waits_for_a_step_worth_its_cache(stubs: Stubs) -> None:
    history = agent_history(4)
    one_result = build(stubs, history[:3]).report.history_tokens
    # Over the trigger, but the results that may go free less than asked for: no step.
    editing = pb.ContextEditing(
        clear_trigger_tokens=one_result, keep_tool_results=2, clear_at_least_tokens=10 * one_result
    )
    assert not build(stubs, history, editing=editing).report.edits
    # With less asked for, a step at each result that leaves the newest two: call_0's
    # once three results are in, call_1's at the fourth.
    editing.clear_at_least_tokens = one_result // 2
    assert edits(build(stubs, history[:7], editing=editing).report) == [
        (2, "EDIT_KIND_CLEARED", "call_0"),
    ]
    assert edits(build(stubs, history, editing=editing).report) == [
        (2, "EDIT_KIND_CLEARED", "call_0"),
        (4, "EDIT_KIND_CLEARED", "call_1"),
    ]


def test_the_newest_step_and_excluded_tools_are_never_cleared(stubs: Stubs) -> None:
    history = agent_history(3)
    # One step with two calls: its results stay, whatever keep_tool_results says.
    calls = [pb.ToolCall(id=f"last_{k}", name="search", arguments="{}") for k in range(2)]
    history.append(pb.Message(role=pb.ROLE_ASSISTANT, tool_calls=calls))
    history += [
        pb.Message(role=pb.ROLE_TOOL, content=search_result(9), tool_call_id=f"last_{k}")
        for k in range(2)
    ]
    editing = pb.ContextEditing(
        clear_trigger_tokens=1, keep_tool_results=0, clear_at_least_tokens=0
    )
    response = build(stubs, history, editing=editing)
    assert [e.tool_call_id for e in response.report.edits] == ["call_0", "call_1", "call_2"]
    editing.exclude_tools.append("search")
    assert not build(stubs, history, editing=editing).report.edits


def test_clear_tool_inputs_replaces_the_arguments_too(stubs: Stubs) -> None:
    history = agent_history(4)
    editing = pb.ContextEditing(
        clear_trigger_tokens=1,
        keep_tool_results=1,
        clear_at_least_tokens=0,
        clear_tool_inputs=True,
    )
    response = build(stubs, history, editing=editing)
    assert edits(response.report) == [
        (1, "EDIT_KIND_CLEARED", "call_0"),
        (2, "EDIT_KIND_CLEARED", "call_0"),
        (3, "EDIT_KIND_CLEARED", "call_1"),
        (4, "EDIT_KIND_CLEARED", "call_1"),
        (5, "EDIT_KIND_CLEARED", "call_2"),
        (6, "EDIT_KIND_CLEARED", "call_2"),
    ]
    [call] = response.messages[2].tool_calls
    assert json.loads(call.arguments) == {"cleared": "arguments of 7 tokens left out"}
    assert response.messages[-2].tool_calls[0].arguments == '{"q": "q3"}'


def test_bad_settings_are_named(stubs: Stubs) -> None:
    editing = pb.ContextEditing(
        tool_result_cap_tokens=10,
        clear_trigger_tokens=-1,
        keep_tool_results=-2,
        clear_at_least_tokens=-3,
        exclude_tools=["ok_tool", "not a name"],
    )
    with pytest.raises(grpc.RpcError) as raised:
        build(stubs, agent_history(1), editing=editing)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert sorted(violations(raised.value)) == [
        "editing.clear_at_least_tokens",
        "editing.clear_trigger_tokens",
        "editing.exclude_tools[1]",
        "editing.keep_tool_results",
        "editing.tool_result_cap_tokens",
    ]


def test_editing_comes_before_the_budget(stubs: Stubs) -> None:
    history = agent_history(6, lines=200)
    unedited = build(stubs, history, token_budget=6000)
    editing = pb.ContextEditing(tool_result_cap_tokens=500)
    edited = build(stubs, history, token_budget=6000, editing=editing)
    # Capped results fit where whole ones were dropped for the budget.
    assert edited.report.history_kept > unedited.report.history_kept
    assert edited.report.total_tokens <= 6000


def test_session_mode_edits_as_the_inline_history(stubs: Stubs) -> None:
    context, sessions = stubs
    user = f"u-{uuid.uuid4().hex[:8]}"
    session = sessions.CreateSession(spb.CreateSessionRequest(user_id=user)).session
    history = agent_history(7)
    sessions.AppendMessages(
        spb.AppendMessagesRequest(user_id=user, session_id=session.id, messages=history)
    )
    editing = pb.ContextEditing(
        tool_result_cap_tokens=400,
        clear_trigger_tokens=3000,
        keep_tool_results=2,
        clear_at_least_tokens=800,
    )
    inline = build(stubs, history, editing=editing, user_message="go on")
    stored = context.BuildMessages(
        pb.BuildMessagesRequest(
            session=pb.SessionContext(user_id=user, session_id=session.id),
            token_budget=200_000,
            tokenizer="cl100k_base",
            editing=editing,
            user_message="go on",
        )
    )
    assert edits(stored.report) == edits(inline.report)
    assert [e.tokens_after for e in stored.report.edits] == [
        e.tokens_after for e in inline.report.edits
    ]
    inline_tools = [m.content for m in inline.messages if m.role == pb.ROLE_TOOL]
    stored_tools = [m.content for m in stored.messages if m.role == pb.ROLE_TOOL]
    assert stored_tools == inline_tools


def test_the_servers_defaults_and_a_request_that_turns_them_off(tmp_path: Path) -> None:
    proc = start_server(
        tmp_path,
        *("--tool-result-cap-tokens", "200", "--clear-trigger-tokens", "800"),
        *("--keep-tool-results", "1", "--clear-at-least-tokens", "500"),
        *("--clear-exclude-tools", "fetch"),
    )
    try:
        with grpc.insecure_channel(proc.address) as channel:
            stubs = (context_pb2_grpc.ContextServiceStub(channel), None)
            history = agent_history(6)
            by_default = build(stubs, history)  # type: ignore[arg-type]
            kinds = {pb.EditKind.Name(e.kind) for e in by_default.report.edits}
            assert kinds == {"EDIT_KIND_CAPPED", "EDIT_KIND_CLEARED"}
            assert all(m.tokens <= 203 for m in by_default.messages if m.role == pb.ROLE_TOOL)
            # A field the request sets overrides its default; the others stay.
            no_cap = build(stubs, history, editing=pb.ContextEditing(tool_result_cap_tokens=0))  # type: ignore[arg-type]
            assert {pb.EditKind.Name(e.kind) for e in no_cap.report.edits} == {"EDIT_KIND_CLEARED"}
            off = build(  # type: ignore[arg-type]
                stubs,
                history,
                editing=pb.ContextEditing(tool_result_cap_tokens=0, clear_trigger_tokens=0),
            )
            assert not off.report.edits
            # The server's excluded tools stay excluded.
            fetched = build(stubs, agent_history(6, tool="fetch"))  # type: ignore[arg-type]
            assert {pb.EditKind.Name(e.kind) for e in fetched.report.edits} == {"EDIT_KIND_CAPPED"}
    finally:
        assert proc.stop() == 0

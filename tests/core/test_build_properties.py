"""Property-based tests of core.build_messages over random chat histories.

Histories mix user and assistant turns, assistants with 0-3 tool calls, tool
results that answer them (or go missing, come twice, arrive after a later
message and are moved back to their call, or answer ids nobody issued), blank
messages and optional compression summaries. One request in five has a blank user
message: a continuation after tool results, where the last tool call and its
results are pinned instead.
Every request passes ``validate_build_request``; the only exceptions allowed are
those a reference predicts: ``BudgetExceeded`` under ``OverflowPolicy.FAIL``,
``InvalidArgument`` when there are no tool results to continue from, and
``FailedPrecondition`` when Anthropic has no user turn in front of them.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from contextd.core.build import build_messages
from contextd.core.build_request import BuildRequest, BuildResult, OverflowPolicy
from contextd.core.errors import BudgetExceeded, FailedPrecondition, InvalidArgument
from contextd.core.formats import OutputFormat
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.pipeline import SUMMARY_HEADER, DropReason
from contextd.core.tokens import message_tokens
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.build_reference import (
    expected_system_text,
    pinned_tail,
    repair_reference,
    required_messages,
    trim_reference,
    unit_start,
)
from tests.support.build_strategies import (
    FORMATS,
    NONBLANK,
    PROPERTY_SETTINGS,
    TEXTS,
    TOKENIZERS,
    budgets,
    requests,
)
from tests.support.provider_rules import anthropic_violations, openai_violations

# --- strategies -------------------------------------------------------------------------------


# --- reference pieces -------------------------------------------------------------------------


def dropped_per_index(report: Any) -> list[tuple[int, DropReason]]:
    """(index, reason) per dropped history message, expanded from the report's ranges."""
    out: list[tuple[int, DropReason]] = []
    for d in report.dropped:
        assert d.count >= 1, d
        out += [(i, d.reason) for i in range(d.start_index, d.start_index + d.count)]
    return out


def check_neutral_pairing(messages: list[ChatMessage]) -> None:
    """No kept tool result without its call in front of it, no kept call without its result."""
    for k, m in enumerate(messages):
        if m.role is Role.TOOL:
            owner = messages[unit_start(messages, k)]
            assert m.tool_call_id in {c.id for c in owner.tool_calls}, (k, m)
        if m.tool_calls:
            run = list(itertools.takewhile(lambda x: x.role is Role.TOOL, messages[k + 1 :]))
            assert sorted(x.tool_call_id for x in run) == sorted(c.id for c in m.tool_calls), k


def check_payload(req: BuildRequest, result: BuildResult, system: str, summary_text: str) -> None:
    payload = result.payload
    last = result.messages[-1]
    if req.output_format is OutputFormat.NEUTRAL:
        assert payload is None
        return
    assert payload is not None
    if req.output_format is OutputFormat.OPENAI:
        # Continuing after tool results, the tool message is last, as in any tool loop.
        assert openai_violations(payload, require_final_user=last.role is Role.USER) == []
        out = payload["messages"]
        if last.role is Role.USER:
            assert out[-1] == {"role": "user", "content": req.user_message}
        else:
            assert out[-1] == {
                "role": "tool",
                "tool_call_id": last.tool_call_id,
                "content": last.content,
            }
        if system:
            assert out[0] == {"role": "system", "content": system}
        return
    assert anthropic_violations(payload) == [], payload
    final_turn = payload["messages"][-1]["content"]
    if last.role is Role.USER:
        assert final_turn[-1] == {"type": "text", "text": req.user_message}
    else:  # the pinned results make up the final user turn
        assert {b["type"] for b in final_turn} == {"tool_result"}
        assert final_turn[-1]["tool_use_id"] == last.tool_call_id
    expected_system = "\n\n".join(t for t in (system, summary_text) if t)
    assert payload.get("system", "") == expected_system


# --- properties -------------------------------------------------------------------------------


@settings(PROPERTY_SETTINGS, max_examples=600)
@given(requests())
def test_build_messages_properties(req: BuildRequest) -> None:
    tok = req.tokenizer
    anthropic = req.output_format is OutputFormat.ANTHROPIC
    system = expected_system_text(req)
    system_tokens = message_tokens(ChatMessage(Role.SYSTEM, system), tok) if system else 0
    survivors, reasons, removed, moved = repair_reference(
        req.history, req.compression_summary, anthropic
    )
    s_idx = [i for i, _ in survivors]
    s_msgs = [m for _, m in survivors]
    continuing = not req.user_message.strip()
    tail_start = pinned_tail(survivors) if continuing else len(survivors)
    if tail_start is None:  # nothing to continue from
        with pytest.raises(InvalidArgument) as refused:
            build_messages(req)
        assert [v.field for v in refused.value.violations] == ["user_message"]
        return
    required = required_messages(req, survivors)
    required_tokens = sum(message_tokens(m, tok) for m in required)
    required_over = required_tokens > req.token_budget

    # Reference trim of everything before the pinned end.
    room = req.token_budget - required_tokens
    summary_text = ""
    if req.compression_summary is not None:
        summary_text = f"{SUMMARY_HEADER}\n\n{req.compression_summary.summary}"
        summary_cost = message_tokens(ChatMessage(Role.SYSTEM, summary_text), tok)
        if summary_cost <= room:
            room -= summary_cost
        else:
            summary_text = ""
    j_budget = trim_reference(s_msgs[:tail_start], room, tok)
    j_expected = j_budget
    if anthropic:
        while j_expected < tail_start and s_msgs[j_expected].role is not Role.USER:
            j_expected += 1
    # Anthropic cannot continue after tool results with no user turn in front of them.
    no_user_turn = anthropic and continuing and j_expected == tail_start

    try:
        result = build_messages(req)
    except BudgetExceeded:
        assert req.overflow_policy is OverflowPolicy.FAIL and required_over
        return
    except FailedPrecondition:
        assert no_user_turn
        return
    assert not no_user_turn
    report = result.report
    msgs = result.messages

    # Token accounting follows the messages actually returned.
    assert result.message_tokens == [message_tokens(m, tok) for m in msgs]
    assert report.total_tokens == sum(result.message_tokens)
    assert report.system_tokens == system_tokens
    assert report.user_message_tokens == (0 if continuing else required_tokens - system_tokens)
    assert report.required_over_budget == required_over
    if not report.required_over_budget:
        assert report.total_tokens <= req.token_budget

    # Layout: [system] [summary] history... then the user message or the pinned tail.
    pinned_end = required[1:] if system else required
    assert msgs[len(msgs) - len(pinned_end) :] == pinned_end
    head = 0
    if system:
        assert msgs[0] == ChatMessage(Role.SYSTEM, system)
        head += 1
    assert report.summary_included == bool(summary_text)
    if summary_text:
        assert msgs[head] == ChatMessage(Role.SYSTEM, summary_text)
        head += 1
    kept = msgs[head:] if continuing else msgs[head:-1]
    assert all(m.role is not Role.SYSTEM for m in kept)
    assert len(kept) == report.history_kept
    check_neutral_pairing(kept)
    check_payload(req, result, system, summary_text)

    # Every input index is kept or dropped, exactly once.
    n = len(req.history)
    drops = dropped_per_index(report)
    dropped_count = Counter(i for i, _ in drops)
    assert all(c == 1 for c in dropped_count.values()), report.dropped
    assert set(dropped_count) <= set(range(n))
    assert n - len(dropped_count) == len(kept)
    # Kept, in the order returned: the newest survivors (results moved behind their calls).
    j = len(survivors) - len(kept)
    kept_idx = s_idx[j:]
    assert set(kept_idx) == set(range(n)) - set(dropped_count)
    # Where each returned message came from; a message whose tool calls were removed
    # is not the input message any more.
    end = [] if continuing else [None]
    changed = {index for index, _ in removed}
    unchanged = [None if i in changed else i for i in kept_idx]
    assert result.sources == [None] * head + unchanged + end

    # Repair drops and moves exactly what the reference does, for the same reasons.
    assert {(r.index, r.tool_call_id) for r in report.removed_tool_calls} == removed
    assert [r.index for r in report.removed_tool_calls] == sorted(i for i, _ in removed)
    reported_moves = [
        (x.tool_call_id, x.from_index, x.call_index) for x in report.moved_tool_results
    ]
    assert set(reported_moves) == moved
    assert [x[1] for x in reported_moves] == sorted(x[1] for x in moved)
    by_index = dict(drops)
    for i, why in reasons.items():
        assert by_index[i] == why, (i, by_index[i], why)
    trim_reasons = {DropReason.BUDGET, DropReason.LEADING_ASSISTANT}
    assert all(by_index[i] in trim_reasons for i in s_idx if i in by_index)

    # Kept history is a contiguous suffix of the survivors, in whole units ...
    assert s_msgs[j:] == kept
    assert not kept or kept[0].role is not Role.TOOL
    leading = sorted(i for i, why in drops if why is DropReason.LEADING_ASSISTANT)
    if anthropic:
        assert not kept or kept[0].role is Role.USER
        j0 = j - len(leading)
        assert sorted(s_idx[j0:j]) == leading
        assert all(m.role is not Role.USER for m in s_msgs[j0:j])
    else:
        assert leading == []
        j0 = j
    # ... the longest one whose units fit (the next older unit did not) ...
    if j0 > 0:
        leading_cost = sum(message_tokens(m, tok) for m in s_msgs[j0:j])
        left = req.token_budget - report.total_tokens - leading_cost
        start = unit_start(s_msgs, j0 - 1)
        cost = sum(message_tokens(m, tok) for m in s_msgs[start:j0])
        assert cost > left, (cost, left)
    # ... which is exactly what the reference trim keeps.
    assert (j0, j) == (j_budget, j_expected)


@st.composite
def plain_requests(draw: st.DrawFn) -> BuildRequest:
    roles = st.sampled_from([Role.USER, Role.ASSISTANT])
    history = draw(st.lists(st.builds(ChatMessage, roles, TEXTS), max_size=12))
    req = BuildRequest(
        user_message=draw(NONBLANK),
        token_budget=1,
        tokenizer=TOKENIZERS["estimate"],
        system_prompts=tuple(draw(st.lists(TEXTS, max_size=3))),
        history=tuple(history),
        output_format=draw(FORMATS),
        overflow_policy=draw(st.sampled_from(list(OverflowPolicy))),
    )
    return replace(req, token_budget=draw(budgets(req)))


def estimate(text: str) -> int:
    return max(1, math.ceil(len(text.encode("utf-8")) / 4)) if text else 0


def budget_rule(req: BuildRequest) -> list[ChatMessage] | None:
    """The budget rule, written out plainly; None when FAIL should raise."""
    system = "\n".join(p for p in req.system_prompts if p.strip())
    left = req.token_budget - estimate(system) - estimate(req.user_message)
    if left < 0 and req.overflow_policy is OverflowPolicy.FAIL:
        return None
    anthropic = req.output_format is OutputFormat.ANTHROPIC
    # Blank user turns stay, except where the format cannot carry them; blank answers go.
    history = [
        m for m in req.history if m.content.strip() or (m.role is Role.USER and not anthropic)
    ]
    kept: list[ChatMessage] = []
    for m in reversed(history):
        if estimate(m.content) > left:
            break
        left -= estimate(m.content)
        kept.insert(0, m)
    if req.output_format is OutputFormat.ANTHROPIC:
        while kept and kept[0].role is not Role.USER:
            kept.pop(0)
    head = [ChatMessage(Role.SYSTEM, system)] if system else []
    return [*head, *kept, ChatMessage(Role.USER, req.user_message)]


@PROPERTY_SETTINGS
@given(plain_requests())
def test_plain_history_follows_the_budget_rule(req: BuildRequest) -> None:
    expected = budget_rule(req)
    if expected is None:
        with pytest.raises(BudgetExceeded):
            build_messages(req)
        return
    result = build_messages(req)
    assert result.messages == expected
    assert result.message_tokens == [estimate(m.content) for m in expected]


def _outcome(req: BuildRequest) -> BuildResult | tuple[type[Exception], str]:
    try:
        return build_messages(req)
    except (BudgetExceeded, FailedPrecondition, InvalidArgument) as error:
        return type(error), str(error)


@PROPERTY_SETTINGS
@given(st.one_of(plain_requests(), requests()))
def test_plain_fast_path_equals_the_pipeline(req: BuildRequest) -> None:
    """A trusted history skips validation, hence the plain-history fast path: both roads
    give the same messages, counts, sources, payload and report."""
    assert _outcome(req) == _outcome(replace(req, history_trusted=True))


# --- tool-call arguments at the edges of JSON ---------------------------------------------------
# The random strategies above only produce finite numbers and valid Unicode. Arguments
# that Python's json accepts but that cannot be re-sent as strict JSON (NaN, Infinity,
# numbers beyond double range, escaped lone surrogates) or that are nested too deep
# to parse are refused in validation, for every output format.

_DEEPLY_NESTED = '{"a":' + "[" * 5000 + "]" * 5000 + "}"
EDGE_ARGUMENTS = [
    pytest.param('{"x": NaN}', id="nan"),
    pytest.param('{"x": -Infinity}', id="infinity"),
    pytest.param('{"x": 1e400}', id="huge-number"),
    pytest.param('{"x": "\\ud800"}', id="lone-surrogate"),
    pytest.param(_DEEPLY_NESTED, id="deep"),
]


@pytest.mark.parametrize("fmt", list(OutputFormat))
@pytest.mark.parametrize("arguments", EDGE_ARGUMENTS)
def test_edge_json_arguments_are_refused(arguments: str, fmt: OutputFormat) -> None:
    history = (
        ChatMessage(Role.USER, "hi"),
        ChatMessage(Role.ASSISTANT, "", (ToolCall("c1", "f", arguments),)),
        ChatMessage(Role.TOOL, "r", tool_call_id="c1"),
    )
    req = BuildRequest("q", 10**6, TOKENIZERS["estimate"], history=history, output_format=fmt)
    with pytest.raises(InvalidArgument) as err:
        build_messages(req)
    assert [v.field for v in err.value.violations] == ["history[1].tool_calls[0].arguments"]


# --- the checkers catch what they claim to ----------------------------------------------------


def _call(cid: str = "c1", name: str = "f", arguments: str = "{}") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


_U = {"role": "user", "content": "hi"}
_OPENAI_BAD: list[tuple[str, list[dict[str, Any]]]] = [
    ("O1", [{"role": "robot", "content": "x"}, _U]),
    ("O2", [{"role": "user"}]),
    ("O3", [{"role": "assistant", "content": None}, _U]),
    ("O4", [{"role": "assistant", "content": "x", "tool_calls": []}, _U]),
    (
        "O4",
        [
            {"role": "assistant", "content": None, "tool_calls": [_call(name="a.b")]},
            {"role": "tool", "tool_call_id": "c1", "content": ""},
            _U,
        ],
    ),
    (
        "O4",
        [
            {"role": "assistant", "content": None, "tool_calls": [_call(arguments="[1]")]},
            {"role": "tool", "tool_call_id": "c1", "content": ""},
            _U,
        ],
    ),
    (
        "O4",
        [
            {"role": "assistant", "content": None, "tool_calls": [_call(arguments='{"a": NaN}')]},
            {"role": "tool", "tool_call_id": "c1", "content": ""},
            _U,
        ],
    ),
    ("O5", [_U, {"role": "tool", "tool_call_id": "c1", "content": "r"}, _U]),
    (
        "O5",
        [
            {"role": "assistant", "content": None, "tool_calls": [_call()]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
            _U,
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
            _U,
        ],
    ),
    (
        "O6",
        [
            {"role": "assistant", "content": None, "tool_calls": [_call(), _call("c2")]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
            _U,
        ],
    ),
    (
        "O6",
        [
            {"role": "assistant", "content": None, "tool_calls": [_call()]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
            _U,
        ],
    ),
    ("O7", [_U, {"role": "assistant", "content": "x"}]),
    ("J0", [{"role": "user", "content": "lone \ud800"}]),
]


@pytest.mark.parametrize(("rule", "messages"), _OPENAI_BAD)
def test_openai_checker_flags(rule: str, messages: list[dict[str, Any]]) -> None:
    found = openai_violations({"messages": messages})
    assert any(f"({rule})" in v for v in found), found


def test_openai_checker_accepts_valid() -> None:
    messages = [
        {"role": "system", "content": "s"},
        _U,
        {"role": "assistant", "content": None, "tool_calls": [_call(), _call("c2", "g_2-x")]},
        {"role": "tool", "tool_call_id": "c2", "content": ""},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "assistant", "content": "done"},
        _U,
    ]
    assert openai_violations({"messages": messages}) == []


def _use(tid: str = "t1", name: str = "f") -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": {}}


def _res(tid: str = "t1") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": "r"}


def _txt(text: str = "hi") -> dict[str, Any]:
    return {"type": "text", "text": text}


_AU = {"role": "user", "content": [_txt()]}
_ANTHROPIC_BAD: list[tuple[str, dict[str, Any]]] = [
    ("A1", {"system": 5, "messages": [_AU]}),
    ("A1", {"messages": [{"role": "system", "content": "s"}, _AU]}),
    ("A2", {"messages": [{"role": "user", "content": []}]}),
    ("A3", {"messages": [{"role": "assistant", "content": "x"}, _AU]}),
    ("A3", {"messages": [_AU, _AU]}),
    ("A3", {"messages": [_AU, {"role": "assistant", "content": "x"}]}),
    ("A4", {"messages": [{"role": "user", "content": [_txt(" \n")]}]}),
    ("A4", {"messages": [{"role": "user", "content": ""}]}),
    (
        "A5",
        {
            "messages": [
                _AU,
                {"role": "assistant", "content": [_use("t.1")]},
                {"role": "user", "content": [_res("t.1"), _txt()]},
            ]
        },
    ),
    (
        "A5",
        {
            "messages": [
                _AU,
                {"role": "assistant", "content": [_use(name="x" * 65)]},
                {"role": "user", "content": [_res(), _txt()]},
            ]
        },
    ),
    (
        "A5",
        {
            "messages": [
                _AU,
                {"role": "assistant", "content": [_use()]},
                {"role": "user", "content": [_res(), _txt()]},
                {"role": "assistant", "content": [_use()]},
                {"role": "user", "content": [_res(), _txt()]},
            ]
        },
    ),
    (
        "A6",
        {
            "messages": [
                _AU,
                {"role": "assistant", "content": [_use(), _use("t2")]},
                {"role": "user", "content": [_res(), _txt()]},
            ]
        },
    ),
    (
        "A6",
        {
            "messages": [
                _AU,
                {"role": "assistant", "content": [_txt()]},
                {"role": "user", "content": [_res(), _txt()]},
            ]
        },
    ),
    (
        "A6",
        {
            "messages": [
                _AU,
                {"role": "assistant", "content": [_use()]},
                {"role": "user", "content": [_res(), _res(), _txt()]},
            ]
        },
    ),
    (
        "A7",
        {
            "messages": [
                _AU,
                {"role": "assistant", "content": [_use()]},
                {"role": "user", "content": [_txt(), _res()]},
            ]
        },
    ),
    (
        "J0",
        {
            "messages": [
                _AU,
                {"role": "assistant", "content": [{**_use(), "input": {"x": math.inf}}]},
                {"role": "user", "content": [_res(), _txt()]},
            ]
        },
    ),
]


@pytest.mark.parametrize(("rule", "payload"), _ANTHROPIC_BAD)
def test_anthropic_checker_flags(rule: str, payload: dict[str, Any]) -> None:
    found = anthropic_violations(payload)
    assert any(f"({rule})" in v for v in found), found


def test_anthropic_checker_accepts_valid() -> None:
    payload = {
        "system": "s",
        "messages": [
            _AU,
            {"role": "assistant", "content": [_txt("ok"), _use(), _use("t2", "g-2")]},
            {
                "role": "user",
                "content": [_res("t2"), {"type": "tool_result", "tool_use_id": "t1"}, _txt()],
            },
            {"role": "assistant", "content": "plain"},
            {"role": "user", "content": "again"},
        ],
    }
    assert anthropic_violations(payload) == []

"""Property-based tests of core.build_messages over random chat histories.

Histories mix user and assistant turns, assistants with 0-3 tool calls, tool
results that answer them (or go missing, come twice, arrive after a later
message, or answer ids nobody issued), blank messages and optional compression
summaries. One request in five has a blank user message: a continuation after
tool results, where the last tool call and its results are pinned instead.
Every request passes ``validate_build_request``; the only exceptions allowed are
those a reference predicts: ``BudgetExceeded`` under ``OverflowPolicy.FAIL``,
``InvalidArgument`` when there are no tool results to continue from, and
``FailedPrecondition`` when Anthropic has no user turn in front of them.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import pytest
from contextd.core.build import BuildRequest, BuildResult, OverflowPolicy, build_messages
from contextd.core.errors import BudgetExceeded, FailedPrecondition, InvalidArgument
from contextd.core.formats import OutputFormat
from contextd.core.messages import ChatMessage, CompressionSummary, Role, ToolCall
from contextd.core.pipeline import SUMMARY_HEADER, DropReason
from contextd.core.prompt import PromptLayers
from contextd.core.tokens import Tokenizer, TokenizerRegistry, message_tokens
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.provider_rules import anthropic_violations, openai_violations

REGISTRY = TokenizerRegistry()
TOKENIZERS: dict[str, Tokenizer] = {n: REGISTRY.get(n) for n in ("estimate", "cl100k_base")}

PROPERTY_SETTINGS = settings(
    max_examples=300,  # the main property below runs twice as many
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --- strategies -------------------------------------------------------------------------------

BLANKS = st.sampled_from(["", " ", "  ", "\n", "\t", " \n\t ", "\u3000", "\u00a0"])
WORDS = st.one_of(
    st.text(alphabet="abcdefghij XYZ.,!?0123", min_size=1, max_size=40),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=20),
    st.sampled_from(["林默是28岁侦探", "héllo wörld", "🙂 ok", '{"json": true}']),
)
TEXTS = st.one_of(BLANKS, WORDS, WORDS)  # blank about a third of the time
NONBLANK = WORDS.filter(lambda s: bool(s.strip()))

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**9), 10**9),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
JSON_OBJECTS = st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=3)
ARGUMENTS = st.one_of(
    st.sampled_from(["", "  ", "{}", " {} "]),
    st.builds(json.dumps, JSON_OBJECTS),
    st.builds(lambda o: json.dumps(o, indent=2, ensure_ascii=False), JSON_OBJECTS),
)
TOOL_NAMES = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)
# A call id is PREFIX_N with N from one counter per history, so ids never repeat.
ID_PREFIXES = st.from_regex(r"[A-Za-z0-9_-]{1,16}", fullmatch=True)


def _tool_calls(
    draw: st.DrawFn, counter: Iterator[int], low: int, high: int
) -> tuple[ToolCall, ...]:
    return tuple(
        ToolCall(f"{draw(ID_PREFIXES)}_{next(counter)}", draw(TOOL_NAMES), draw(ARGUMENTS))
        for _ in range(draw(st.integers(low, high)))
    )


@st.composite
def histories(draw: st.DrawFn, end_with_tool_results: bool = False) -> list[ChatMessage]:
    counter = itertools.count()
    msgs: list[ChatMessage] = []
    late: list[ChatMessage] = []  # results held back to land after some later message
    if draw(st.integers(0, 3)):  # conversations mostly open with the user
        msgs.append(ChatMessage(Role.USER, draw(NONBLANK)))
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["user", "assistant", "user", "assistant", "late", "ghost"]))
        if kind == "user":
            msgs.append(ChatMessage(Role.USER, draw(TEXTS)))
        elif kind == "assistant":
            calls = _tool_calls(draw, counter, 0, 3)
            msgs.append(ChatMessage(Role.ASSISTANT, draw(TEXTS), calls))
            results: list[ChatMessage] = []
            for call in calls:
                fate = draw(st.sampled_from(["answer"] * 4 + ["missing", "twice", "late"]))
                result = ChatMessage(Role.TOOL, draw(TEXTS), tool_call_id=call.id)
                if fate == "answer":
                    results.append(result)
                elif fate == "twice":
                    results += [result, ChatMessage(Role.TOOL, draw(TEXTS), tool_call_id=call.id)]
                elif fate == "late":
                    late.append(result)
            msgs.extend(draw(st.permutations(results)))
        elif kind == "ghost":
            msgs.append(ChatMessage(Role.TOOL, draw(TEXTS), tool_call_id=f"ghost_{next(counter)}"))
        elif late:
            msgs.append(late.pop(draw(st.integers(0, len(late) - 1))))
    if end_with_tool_results:  # the host ran the tools and wants the model to go on
        calls = _tool_calls(draw, counter, 1, 3)
        msgs.append(ChatMessage(Role.ASSISTANT, draw(TEXTS), calls))
        answers = [ChatMessage(Role.TOOL, draw(TEXTS), tool_call_id=c.id) for c in calls]
        msgs.extend(draw(st.permutations(answers)))
    # Most messages get an id so a compression summary can name them.
    return [replace(m, id=f"m{i}") if draw(st.integers(0, 4)) else m for i, m in enumerate(msgs)]


@st.composite
def summaries(draw: st.DrawFn, history: list[ChatMessage]) -> CompressionSummary | None:
    ids = [m.id for m in history if m.id]
    if not ids or draw(st.integers(0, 2)):
        return None
    prefix = ids[: draw(st.integers(1, len(ids)))]
    return CompressionSummary(tuple(prefix), prefix[0], draw(NONBLANK))


@st.composite
def budgets(draw: st.DrawFn, req: BuildRequest) -> int:
    """Tiny (not even the required messages fit), near the cost of the history, or large."""
    tok = req.tokenizer
    survivors = repair_reference(req.history, req.compression_summary)[0]
    need = max(1, sum(message_tokens(m, tok) for m in required_messages(req, survivors)))
    rest = sum(message_tokens(m, tok) for m in req.history)
    if req.compression_summary is not None:
        rest += tok.count(req.compression_summary.summary) + 10
    kind = draw(st.sampled_from(["large", "near", "large", "near", "tiny"]))
    if kind == "tiny":
        return draw(st.integers(1, need))
    if kind == "near":
        return max(1, need + draw(st.sampled_from(range(0, rest + 5))))
    return need + rest + draw(st.integers(0, 5000))


# Provider formats first: they get the most checks.
FORMATS = st.sampled_from([OutputFormat.ANTHROPIC, OutputFormat.OPENAI, OutputFormat.NEUTRAL])
LAYERS = st.builds(
    PromptLayers,
    identity=NONBLANK,
    rules=TEXTS,
    skill=TEXTS,
    mode=TEXTS,
    memory=TEXTS,
    context=TEXTS,
)


@st.composite
def requests(draw: st.DrawFn) -> BuildRequest:
    # One request in five has a blank user message: a continuation after tool results.
    # Most of those histories end with answered calls; the rest must be refused.
    continuing = draw(st.integers(0, 4)) == 0
    history = draw(histories(end_with_tool_results=continuing and draw(st.integers(0, 4)) > 0))
    if not history:  # a blank user message needs a history (request validation)
        continuing = False
    use_layers = draw(st.integers(0, 3)) == 0
    req = BuildRequest(
        user_message=draw(BLANKS) if continuing else draw(NONBLANK),
        token_budget=1,
        tokenizer=TOKENIZERS[draw(st.sampled_from(sorted(TOKENIZERS)))],
        system_prompts=() if use_layers else tuple(draw(st.lists(TEXTS, max_size=3))),
        layers=draw(LAYERS) if use_layers else None,
        history=tuple(history),
        compression_summary=draw(summaries(history)),
        output_format=draw(FORMATS),
        overflow_policy=draw(st.sampled_from(list(OverflowPolicy))),
    )
    return replace(req, token_budget=draw(budgets(req)))


# --- reference pieces -------------------------------------------------------------------------


def expected_system_text(req: BuildRequest) -> str:
    if req.layers is not None:
        texts = [getattr(req.layers, n) for n in ("identity", "rules", "skill", "mode", "memory")]
        texts.append(req.layers.context)
        return "\n\n".join(t for t in texts if t.strip())
    return "\n".join(p for p in req.system_prompts if p.strip())


def repair_reference(
    history: Sequence[ChatMessage], summary: CompressionSummary | None
) -> tuple[list[tuple[int, ChatMessage]], dict[int, DropReason], set[tuple[int, str]]]:
    """Survivors of repair (index, message), why each other index went, removed calls."""
    reasons: dict[int, DropReason] = {}
    replaced = set(summary.message_ids) if summary else set()
    items = []
    for i, m in enumerate(history):
        if m.id and m.id in replaced:
            reasons[i] = DropReason.COMPRESSED
        elif not m.content.strip() and (
            m.role is Role.USER or (m.role is Role.ASSISTANT and not m.tool_calls)
        ):
            reasons[i] = DropReason.EMPTY
        else:
            items.append((i, m))
    # A result survives only inside the run of results right after its call, once.
    placed: list[tuple[int, ChatMessage]] = []
    waiting: set[str] = set()
    for i, m in items:
        if m.role is Role.TOOL:
            if m.tool_call_id in waiting:
                waiting.discard(m.tool_call_id)
                placed.append((i, m))
            else:
                reasons[i] = DropReason.ORPHANED_TOOL_RESULT
        else:
            waiting = {c.id for c in m.tool_calls}
            placed.append((i, m))
    answered = {m.tool_call_id for _, m in placed if m.role is Role.TOOL}
    survivors: list[tuple[int, ChatMessage]] = []
    removed: set[tuple[int, str]] = set()
    for i, m in placed:
        calls = tuple(c for c in m.tool_calls if c.id in answered)
        removed |= {(i, c.id) for c in m.tool_calls if c.id not in answered}
        if m.tool_calls and not calls and not m.content.strip():
            reasons[i] = DropReason.EMPTY
        else:
            survivors.append((i, replace(m, tool_calls=calls)))
    return survivors, reasons, removed


def unit_start(msgs: Sequence[ChatMessage], end: int) -> int:
    """Index of the first message of the tool-call unit that ends at ``end``."""
    start = end
    while start > 0 and msgs[start].role is Role.TOOL:
        start -= 1
    return start


def pinned_tail(survivors: list[tuple[int, ChatMessage]]) -> int | None:
    """Without a user message: where the last unit (call + results) starts; None if impossible."""
    msgs = [m for _, m in survivors]
    if not msgs or msgs[-1].role is not Role.TOOL:
        return None
    return unit_start(msgs, len(msgs) - 1)


def required_messages(
    req: BuildRequest, survivors: list[tuple[int, ChatMessage]]
) -> list[ChatMessage]:
    """What is kept whatever the budget: system prompt, then user message or pinned tail."""
    system = expected_system_text(req)
    head = [ChatMessage(Role.SYSTEM, system)] if system else []
    if req.user_message.strip():
        return [*head, ChatMessage(Role.USER, req.user_message)]
    start = pinned_tail(survivors)
    return head + ([] if start is None else [m for _, m in survivors[start:]])


def trim_reference(msgs: Sequence[ChatMessage], room: int, tok: Tokenizer) -> int:
    """Seed 000 over units: start of the longest suffix of whole units that fits in room."""
    start = len(msgs)
    while start > 0:
        unit = unit_start(msgs, start - 1)
        cost = sum(message_tokens(m, tok) for m in msgs[unit:start])
        if cost > room:
            break
        room -= cost
        start = unit
    return start


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
    survivors, reasons, removed = repair_reference(req.history, req.compression_summary)
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
    kept_idx = [i for i in range(n) if i not in dropped_count]
    assert len(kept_idx) == len(kept)
    # Where each returned message came from; a message whose tool calls were removed
    # is not the input message any more.
    end = [] if continuing else [None]
    changed = {index for index, _ in removed}
    unchanged = [None if i in changed else i for i in kept_idx]
    assert result.sources == [None] * head + unchanged + end

    # Repair drops exactly what the reference drops, for the same reasons.
    assert {(r.index, r.tool_call_id) for r in report.removed_tool_calls} == removed
    by_index = dict(drops)
    for i, why in reasons.items():
        assert by_index[i] == why, (i, by_index[i], why)
    trim_reasons = {DropReason.BUDGET, DropReason.LEADING_ASSISTANT}
    assert all(by_index[i] in trim_reasons for i in s_idx if i in by_index)

    # Kept history is a contiguous suffix of the survivors, in whole units ...
    j = len(survivors) - len(kept)
    assert s_idx[j:] == kept_idx
    assert s_msgs[j:] == kept
    assert not kept or kept[0].role is not Role.TOOL
    leading = sorted(i for i, why in drops if why is DropReason.LEADING_ASSISTANT)
    if anthropic:
        assert not kept or kept[0].role is Role.USER
        j0 = j - len(leading)
        assert s_idx[j0:j] == leading
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


def seed_rule(req: BuildRequest) -> list[ChatMessage] | None:
    """Seed 000's rule, written out plainly; None when FAIL should raise."""
    system = "\n".join(p for p in req.system_prompts if p.strip())
    left = req.token_budget - estimate(system) - estimate(req.user_message)
    if left < 0 and req.overflow_policy is OverflowPolicy.FAIL:
        return None
    history = [m for m in req.history if m.content.strip()]
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
def test_plain_history_follows_seed_rule(req: BuildRequest) -> None:
    expected = seed_rule(req)
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

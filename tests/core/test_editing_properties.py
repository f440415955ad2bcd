"""Property-based tests of context editing (core/editing) and its place in the build.

Agent histories (a question, then steps of one to three tool calls with results of any
size, sometimes a user message between steps) and the messy histories of
test_build_properties.py, under random editing settings:

- a capped result keeps a prefix and a suffix of the text around a marker that counts
  what was left out, within the cap;
- pairing is never broken: every provider format is still valid, every kept call has
  its result;
- editing is deterministic, and the same whether the counts are given (a stored
  session) or counted (an inline history);
- edit, then budget: a build with editing is the build of the edited history;
- clearing only grows with the history, and a request whose history adds messages
  without a clearing step keeps the previous request's messages byte for byte; the
  newest results and the newest step's are never cleared; a tool-use trigger clears
  down to the kept results, then waits for as many new ones.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from contextd.core.build import build_messages
from contextd.core.build_request import BuildRequest
from contextd.core.editing import EditingSettings, EditKind, edit_history
from contextd.core.editing.capping import cap_text
from contextd.core.formats import OutputFormat
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.tokens import Tokenizer, message_tokens
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.build_strategies import PROPERTY_SETTINGS, TOKENIZERS, WORDS, requests
from tests.support.provider_rules import anthropic_violations, openai_violations

# Each example builds or edits several times: fewer than the build properties run.
EDITING_SETTINGS = settings(PROPERTY_SETTINGS, max_examples=100)

TOOLS = ("search", "fetch", "shell")

LINES = st.one_of(
    WORDS,
    st.builds(lambda k, s: json.dumps({"rank": k, "snippet": s}), st.integers(0, 10**6), WORDS),
    st.sampled_from(["", "    indented", "\\u00e9 escaped", "12345.678", "true"]),
)
RESULTS = st.one_of(
    WORDS,
    st.lists(LINES, min_size=1, max_size=120).map("\n".join),
    st.builds(lambda s, n: s * n, WORDS, st.integers(1, 200)),  # a long line, no breaks
)


@st.composite
def agent_histories(draw: st.DrawFn) -> list[ChatMessage]:
    history = [ChatMessage(Role.USER, "find it")]
    call_ids = iter(range(10_000))
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.integers(0, 5)) == 0:
            history.append(ChatMessage(Role.USER, draw(WORDS.filter(str.strip))))
        calls = tuple(
            ToolCall(f"call_{next(call_ids)}", draw(st.sampled_from(TOOLS)), '{"q": "x"}')
            for _ in range(draw(st.integers(1, 3)))
        )
        history.append(ChatMessage(Role.ASSISTANT, "", calls))
        history += [ChatMessage(Role.TOOL, draw(RESULTS), tool_call_id=c.id) for c in calls]
    return history


EDITING = st.builds(
    EditingSettings,
    cap_tokens=st.sampled_from([0, 0, 64, 100, 300]),
    clear_trigger_tokens=st.sampled_from([0, 1, 200, 800, 3000]),
    clear_trigger_tool_uses=st.sampled_from([0, 0, 1, 4]),
    keep_tool_results=st.integers(0, 4),
    clear_at_least_tokens=st.sampled_from([0, 50, 400, 2000]),
    clear_tool_inputs=st.booleans(),
    exclude_tools=st.sampled_from([frozenset(), frozenset({"fetch"})]),
)
CLEARING = EDITING.filter(lambda e: e.clearing)


def tokenizers() -> st.SearchStrategy[Tokenizer]:
    return st.sampled_from([TOKENIZERS[n] for n in sorted(TOKENIZERS)])


# --- capping ----------------------------------------------------------------------------


MARKER = re.compile(r"\[\.\.\. (\d+) tokens \((\d+) lines\) of this tool result left out \.\.\.\]")


@EDITING_SETTINGS
@given(RESULTS, st.integers(64, 400), tokenizers())
def test_a_capped_text_is_its_head_and_tail_around_a_true_marker(
    text: str, cap: int, tok: Tokenizer
) -> None:
    capped = cap_text(text, cap, tok)
    if tok.count(text) <= cap:
        assert capped is None
        return
    assert capped is not None and tok.count(capped) <= cap
    assert cap_text(text, cap, tok) == capped  # the same bytes every time
    [marker] = MARKER.finditer(capped)
    head = capped[: marker.start()].removesuffix("\n")  # the marker has a line of its own
    tail = capped[marker.end() :].removeprefix("\n")
    assert text.startswith(head) and text.endswith(tail)
    middle = text[len(head) : len(text) - len(tail)]
    assert int(marker.group(1)) == tok.count(middle)
    assert int(marker.group(2)) == middle.count("\n")


# --- pairing, determinism, the counts given or counted ----------------------------------


@EDITING_SETTINGS
@given(requests(), EDITING)
def test_edited_builds_stay_valid_and_deterministic(
    req: BuildRequest, editing: EditingSettings
) -> None:
    req = replace(req, editing=editing)
    try:
        result = build_messages(req)
    except Exception as error:  # the same refusals as without editing
        unedited_error: Exception | None = None
        try:
            build_messages(replace(req, editing=EditingSettings()))
        except Exception as other:
            unedited_error = other
        assert type(unedited_error) is type(error)
        return
    again = build_messages(req)
    assert (again.messages, again.message_tokens, again.report) == (
        result.messages,
        result.message_tokens,
        result.report,
    )
    if req.output_format is OutputFormat.OPENAI:
        assert openai_violations(result.payload, require_final_user=False) == []
    if req.output_format is OutputFormat.ANTHROPIC:
        assert anthropic_violations(result.payload, require_final_user=False) == []
    # Every kept call has its result, right after its message.
    messages = result.messages
    for k, m in enumerate(messages):
        if m.tool_calls:
            ids = [r.tool_call_id for r in messages[k + 1 : k + 1 + len(m.tool_calls)]]
            assert sorted(ids) == sorted(c.id for c in m.tool_calls)


# --- edit, then budget ------------------------------------------------------------------


@EDITING_SETTINGS
@given(agent_histories(), EDITING, tokenizers(), st.integers(50, 20_000), st.booleans())
def test_a_build_with_editing_is_the_build_of_the_edited_history(
    history: list[ChatMessage], editing: EditingSettings, tok: Tokenizer, budget: int, go_on: bool
) -> None:
    req = BuildRequest(
        user_message="" if go_on and len(history) > 1 else "next?",
        token_budget=budget,
        tokenizer=tok,
        system_prompts=["You are an agent."],
        history=history,
        editing=editing,
    )
    result = build_messages(req)
    edited = edit_history(history, (), None, editing, tok)
    plain = replace(req, editing=EditingSettings())
    if edited is not None:
        plain = replace(plain, history=edited.history)
    assert result.messages == build_messages(plain).messages
    # A stored session gives the counts, an inline history is counted: the same build.
    known = [message_tokens(m, tok) for m in history]
    stored = build_messages(replace(req, history_tokens=known, history_trusted=True))
    assert (stored.messages, stored.message_tokens) == (result.messages, result.message_tokens)
    assert stored.report.edits == result.report.edits


# --- clearing between steps -------------------------------------------------------------


def _step_points(history: list[ChatMessage]) -> list[int]:
    """History lengths a model request can be made at: no tool result follows."""
    return [
        k
        for k in range(1, len(history) + 1)
        if k == len(history) or history[k].role is not Role.TOOL
    ]


def _cleared(history: list[ChatMessage], editing: EditingSettings, tok: Tokenizer) -> set[str]:
    edited = edit_history(history, (), None, editing, tok)
    if edited is None:
        return set()
    return {
        e.tool_call_id
        for e in edited.edits
        if e.kind is EditKind.CLEARED and history[e.index].role is Role.TOOL
    }


@EDITING_SETTINGS
@given(agent_histories(), CLEARING, tokenizers())
def test_clearing_grows_in_steps_and_keeps_the_prefix_between_them(
    history: list[ChatMessage], editing: EditingSettings, tok: Tokenizer
) -> None:
    before: list[ChatMessage] = []
    cleared_before: set[str] = set()
    for k in _step_points(history):
        now = history[:k]
        edited = edit_history(now, (), None, editing, tok)
        sent = now if edited is None else edited.history
        cleared = _cleared(now, editing, tok)
        assert cleared_before <= cleared, "a cleared result came back"
        stepped = edited is not None and edited.first_new is not None
        assert stepped == (cleared != cleared_before)
        if not stepped:
            # Byte for byte the previous request's messages, then the new ones.
            assert sent[: len(before)] == before
        else:
            assert edited is not None and edited.first_new is not None
            assert sent[: edited.first_new] == before[: edited.first_new]
        before, cleared_before = list(sent), cleared


@EDITING_SETTINGS
@given(agent_histories(), CLEARING, tokenizers())
def test_the_newest_results_and_step_are_never_cleared(
    history: list[ChatMessage], editing: EditingSettings, tok: Tokenizer
) -> None:
    cleared = _cleared(history, editing, tok)
    results = [m.tool_call_id for m in history if m.role is Role.TOOL]
    newest = (
        results[len(results) - editing.keep_tool_results :] if editing.keep_tool_results else []
    )
    last_calls = next((m.tool_calls for m in reversed(history) if m.tool_calls), ())
    assert not cleared & set(newest)
    assert not cleared & {c.id for c in last_calls}
    tools = {c.id: c.name for m in history for c in m.tool_calls}
    assert not {tools[i] for i in cleared} & editing.exclude_tools


def test_a_tool_use_trigger_clears_down_to_the_kept_results_then_waits() -> None:
    tok = TOKENIZERS["cl100k_base"]
    history = [ChatMessage(Role.USER, "find it")]
    for k in range(8):
        history.append(ChatMessage(Role.ASSISTANT, "", (ToolCall(f"call_{k}", "search", "{}"),)))
        history.append(ChatMessage(Role.TOOL, f"result {k} " * 20, tool_call_id=f"call_{k}"))
    editing = EditingSettings(
        clear_trigger_tool_uses=4, keep_tool_results=2, clear_at_least_tokens=0
    )

    def cleared_after(calls: int) -> list[str]:
        return sorted(_cleared(history[: 1 + 2 * calls], editing, tok))

    assert cleared_after(4) == []  # four results: not over the trigger
    # The fifth goes over: every result but the newest two goes, in one step.
    assert cleared_after(5) == ["call_0", "call_1", "call_2"]
    assert cleared_after(7) == ["call_0", "call_1", "call_2"]  # four not cleared: waits
    assert cleared_after(8) == [f"call_{k}" for k in range(6)]
    # With a least amount no step can free, nothing is cleared.
    stingy = replace(editing, clear_at_least_tokens=10**6)
    assert _cleared(history, stingy, tok) == set()

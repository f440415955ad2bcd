"""Tool results a message separated from their calls are moved back behind them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from contextd.core.build import build_messages
from contextd.core.build_request import BuildRequest, BuildResult
from contextd.core.formats import OutputFormat
from contextd.core.messages import ChatMessage, CompressionSummary, Role, ToolCall
from contextd.core.pipeline import (
    DroppedRange,
    DropReason,
    MovedToolResult,
    RemovedToolCall,
    restore_tool_results,
)
from contextd.core.tokens import EstimateTokenizer, message_tokens

TOK = EstimateTokenizer()


def user(text: str, id: str = "") -> ChatMessage:
    return ChatMessage(Role.USER, text, id=id)


def calls(*ids: str, text: str = "") -> ChatMessage:
    return ChatMessage(Role.ASSISTANT, text, tuple(ToolCall(i, "lookup", "{}") for i in ids))


def result(call_id: str, text: str = "") -> ChatMessage:
    return ChatMessage(Role.TOOL, text or f"result of {call_id}", tool_call_id=call_id)


def build(history: Sequence[ChatMessage], budget: int = 10_000, **options: object) -> BuildResult:
    return build_messages(replace(BuildRequest("go on", budget, TOK, history=history), **options))


def history_part(built: BuildResult) -> list[ChatMessage]:
    return built.messages[:-1]  # without the user message


def test_moved_back_across_one_user_message() -> None:
    history = [user("look it up"), calls("a"), user("wait"), result("a")]
    built = build(history)
    assert history_part(built) == [history[0], history[1], history[3], history[2]]
    assert built.sources == [0, 1, 3, 2, None]
    assert built.report.moved_tool_results == [MovedToolResult("a", 3, 1)]
    assert built.report.dropped == []
    assert built.report.removed_tool_calls == []
    assert built.report.history_kept == 4


def test_moved_back_across_several_messages() -> None:
    history = [
        user("q"),
        calls("a"),
        user("wait"),
        ChatMessage(Role.ASSISTANT, "waiting"),
        ChatMessage(Role.ASSISTANT, "", id="blank"),  # an answer that says nothing: dropped
        user("go on"),
        result("a"),
    ]
    built = build(history)
    assert built.sources == [0, 1, 6, 2, 3, 5, None]
    assert built.report.moved_tool_results == [MovedToolResult("a", 6, 1)]
    assert built.report.dropped == [DroppedRange(4, 1, DropReason.EMPTY)]


def test_results_of_one_message_follow_its_results_in_place_in_call_order() -> None:
    history = [user("q"), calls("a", "b", "c"), result("b"), user("wait"), result("c"), result("a")]
    built = build(history)
    assert [m.tool_call_id for m in history_part(built)] == ["", "", "b", "a", "c", ""]
    assert built.sources == [0, 1, 2, 5, 4, 3, None]
    assert built.report.moved_tool_results == [
        MovedToolResult("c", 4, 1),
        MovedToolResult("a", 5, 1),
    ]


def test_two_calls_each_with_an_interrupted_result() -> None:
    history = [
        user("q"),
        calls("a"),
        user("wait"),
        calls("b"),
        user("and wait"),
        result("b"),
        result("a"),
    ]
    built = build(history)
    assert built.sources == [0, 1, 6, 2, 3, 5, 4, None]
    assert built.report.moved_tool_results == [
        MovedToolResult("b", 5, 3),
        MovedToolResult("a", 6, 1),
    ]
    assert built.report.removed_tool_calls == []


def test_a_result_in_a_later_calls_run_is_moved_to_its_own_call() -> None:
    history = [user("q"), calls("a"), calls("b"), result("a"), result("b")]
    built = build(history)
    assert built.sources == [0, 1, 3, 2, 4, None]
    assert built.report.moved_tool_results == [MovedToolResult("a", 3, 1)]


def test_a_result_whose_id_matches_no_call_is_still_dropped() -> None:
    history = [user("q"), calls("a", text="let me see"), user("wait"), result("ghost")]
    built = build(history)
    assert built.report.moved_tool_results == []
    assert built.report.dropped == [DroppedRange(3, 1, DropReason.ORPHANED_TOOL_RESULT)]
    assert built.report.removed_tool_calls == [RemovedToolCall(1, "a")]
    assert built.sources == [0, None, 2, None]  # the call removed: not the caller's message


def test_a_result_before_its_call_is_still_dropped() -> None:
    history = [user("q"), result("a"), calls("a", text="see"), user("and?")]
    built = build(history)
    assert built.report.moved_tool_results == []
    assert built.report.dropped == [DroppedRange(1, 1, DropReason.ORPHANED_TOOL_RESULT)]
    assert built.report.removed_tool_calls == [RemovedToolCall(2, "a")]


def test_a_duplicate_result_is_dropped() -> None:
    history = [user("q"), calls("a"), user("wait"), result("a", "first"), result("a", "again")]
    built = build(history)
    assert built.sources == [0, 1, 3, 2, None]
    assert built.report.moved_tool_results == [MovedToolResult("a", 3, 1)]
    assert built.report.dropped == [DroppedRange(4, 1, DropReason.ORPHANED_TOOL_RESULT)]


def test_a_late_duplicate_of_a_result_in_place_is_dropped() -> None:
    history = [user("q"), calls("a"), result("a"), user("wait"), result("a", "again")]
    built = build(history)
    assert built.report.moved_tool_results == []
    assert built.report.dropped == [DroppedRange(4, 1, DropReason.ORPHANED_TOOL_RESULT)]


def test_a_moved_unit_over_the_budget_is_dropped_at_the_callers_indexes() -> None:
    history = [user("q" * 400), calls("a"), user("wait"), result("a", "r" * 400), user("ok")]
    built = build(history, budget=60)
    # Kept: "wait" and "ok"; the call went with its moved result, both for the budget.
    assert built.sources == [2, 4, None]
    assert built.report.dropped == [
        DroppedRange(0, 2, DropReason.BUDGET),
        DroppedRange(3, 1, DropReason.BUDGET),
    ]
    assert built.report.moved_tool_results == [MovedToolResult("a", 3, 1)]


def test_known_token_counts_follow_their_messages() -> None:
    history = [user("q"), calls("a"), user("wait"), result("a")]
    counts = [message_tokens(m, TOK) for m in history]
    counts[3] = 7  # a stored count, not what the tokenizer would say
    built = build(history, history_tokens=counts, history_trusted=True)
    assert built.sources == [0, 1, 3, 2, None]
    assert built.message_tokens[:4] == [counts[0], counts[1], 7, counts[2]]
    assert built.report.history_tokens == sum(counts)


def test_messages_the_summary_replaces_neither_end_a_run_nor_move() -> None:
    history = [
        user("q", id="m0"),
        calls("a"),
        user("replaced", id="m2"),
        result("a"),
        user("later"),
    ]
    summary = CompressionSummary(("m0", "m2"), "m0", "they asked")
    assert restore_tool_results(history, {"m0", "m2"}) is None
    built = build(history, compression_summary=summary)
    assert built.report.moved_tool_results == []
    assert built.report.dropped == [
        DroppedRange(0, 1, DropReason.COMPRESSED),
        DroppedRange(2, 1, DropReason.COMPRESSED),
    ]


def test_openai_output_of_a_moved_history() -> None:
    history = [user("q"), calls("a", "b"), user("wait"), result("b"), result("a")]
    payload = build(history, output_format=OutputFormat.OPENAI).payload
    assert payload is not None
    assert [(m["role"], m.get("tool_call_id")) for m in payload["messages"]] == [
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("tool", "b"),
        ("user", None),
        ("user", None),
    ]


def test_anthropic_tool_results_follow_their_tool_use_turn() -> None:
    history = [user("q"), calls("a", "b"), user("wait"), result("b"), result("a")]
    payload = build(history, output_format=OutputFormat.ANTHROPIC).payload
    assert payload is not None
    turns = payload["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [b["id"] for b in turns[1]["content"]] == ["a", "b"]
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "a", "content": "result of a"},
        {"type": "tool_result", "tool_use_id": "b", "content": "result of b"},
        {"type": "text", "text": "wait"},
        {"type": "text", "text": "go on"},
    ]


def test_nothing_out_of_place_keeps_the_history_as_it_is() -> None:
    history = [user("q"), calls("a", "b"), result("b"), result("a"), user("ghost?"), result("x")]
    assert restore_tool_results(history, ()) is None

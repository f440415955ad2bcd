"""The Python SDK (clients/python) against a live contextd server, sync and async."""

from __future__ import annotations

from typing import Any

import contextd_client
import grpc
import grpc.aio
from contextd_client import (
    AssembledPrompt,
    BuildResult,
    ContextClient,
    DroppedRange,
    LayerInfo,
    MovedToolResult,
    RemovedToolCall,
    TokenCount,
    TokenizerList,
    pb,
)

from tests.support.sdk import EXPECTED_HISTORY_OUT, HISTORY, expect_error, without_tokens

# AssemblePrompt ---------------------------------------------------------------------


def test_assemble_prompt(client: ContextClient) -> None:
    prompt = client.assemble_prompt(
        "You are Ada.",
        rules="Be kind.",
        skill="  ",
        context="Repo: contextd",
        tokenizer="estimate",
    )
    assert isinstance(prompt, AssembledPrompt)
    assert prompt.system_prompt == "You are Ada.\n\nBe kind.\n\nRepo: contextd"
    assert prompt.layers == [
        LayerInfo("identity", True, 3),
        LayerInfo("rules", True, 2),
        LayerInfo("skill", False, 0),
        LayerInfo("mode", False, 0),
        LayerInfo("memory", False, 0),
        LayerInfo("context", True, 4),
    ]
    assert prompt.tokens == 10  # ceil(38 bytes / 4)
    assert prompt.tokenizer == "estimate"


def test_assemble_prompt_uses_the_server_default_tokenizer(client: ContextClient) -> None:
    default = client.list_tokenizers().default
    assert client.assemble_prompt("You are Ada.").tokenizer == default


def test_assemble_prompt_blank_identity_is_named(client: ContextClient) -> None:
    error = expect_error(lambda: client.assemble_prompt("   ", rules="Be kind."))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.fields == ["layers.identity"]


# BuildMessages ----------------------------------------------------------------------


def test_build_messages_converts_dicts_both_ways(client: ContextClient) -> None:
    result = client.build_messages(
        "And tomorrow?",
        system_prompt="You are a weather bot.",
        history=HISTORY,
        token_budget=10_000,
    )
    assert isinstance(result, BuildResult)
    assert result.messages[0]["role"] == "system"
    assert without_tokens(result.messages[1:-1]) == EXPECTED_HISTORY_OUT
    assert without_tokens(result.messages[-1:]) == [{"role": "user", "content": "And tomorrow?"}]
    # Key order: role, content, tool_calls, tool_call_id, id, tokens.
    assert list(result.messages[2]) == ["role", "content", "tool_calls", "id", "tokens"]
    assert list(result.messages[3]) == ["role", "content", "tool_call_id", "id", "tokens"]
    assert all(isinstance(m["tokens"], int) and m["tokens"] > 0 for m in result.messages)
    assert result.payload is None
    report = result.report
    assert report.removed_tool_calls == [RemovedToolCall(4, "call_c")]
    assert report.dropped == []
    assert report.history_kept == 6
    assert report.total_tokens == sum(m["tokens"] for m in result.messages)
    assert report.system_tokens == result.messages[0]["tokens"]
    assert report.user_message_tokens == result.messages[-1]["tokens"]


def test_build_messages_reports_a_moved_tool_result(client: ContextClient) -> None:
    call = {"id": "call_w", "name": "weather", "arguments": "{}"}
    history = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "user", "content": "wait"},
        {"role": "tool", "tool_call_id": "call_w", "content": "sunny"},
    ]
    result = client.build_messages("Go on", history=history, token_budget=10_000)
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool", "user", "user"]
    assert result.report.moved_tool_results == [MovedToolResult("call_w", 3, 1)]
    assert result.report.dropped == []


def test_output_messages_feed_back_unchanged(client: ContextClient) -> None:
    first = client.build_messages("Next?", history=HISTORY, token_budget=10_000)
    again = client.build_messages("Next?", history=first.messages[:-1], token_budget=10_000)
    assert again.messages == first.messages


def test_pb_messages_are_accepted_in_history(client: ContextClient) -> None:
    history: list[contextd_client.MessageLike] = [
        pb.Message(role=pb.ROLE_USER, content="hi", id="a"),
        {"role": "assistant", "content": "hello"},
    ]
    result = client.build_messages("bye", history=history, token_budget=1000)
    assert without_tokens(result.messages) == [
        {"role": "user", "content": "hi", "id": "a"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "bye"},
    ]


def test_system_prompts_are_joined_by_newline(client: ContextClient) -> None:
    result = client.build_messages(
        "Hi", system_prompt=["First.", "  ", "Second."], token_budget=1000
    )
    assert result.messages[0] == {
        "role": "system",
        "content": "First.\nSecond.",
        "tokens": result.report.system_tokens,
    }
    single = client.build_messages("Hi", system_prompt="Only.", token_budget=1000)
    assert single.messages[0]["content"] == "Only."
    none = client.build_messages("Hi", token_budget=1000)
    assert [m["role"] for m in none.messages] == ["user"]


def test_openai_payload(client: ContextClient) -> None:
    result = client.build_messages(
        "And tomorrow?",
        system_prompt="You are a weather bot.",
        history=HISTORY,
        token_budget=10_000,
        output_format="openai",
    )
    assert result.payload is not None
    messages = result.payload["messages"]
    assert messages[0] == {"role": "system", "content": "You are a weather bot."}
    assert messages[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
            },
        ],
    }
    assert messages[3] == {"role": "tool", "tool_call_id": "call_a", "content": "18 C"}
    assert messages[-1] == {"role": "user", "content": "And tomorrow?"}


def test_anthropic_payload_and_layers(client: ContextClient) -> None:
    result = client.build_messages(
        "Thanks!",
        layers={"identity": "You are Ada.", "mode": "Mode: chat"},
        history=[{"role": "assistant", "content": "Hello!", "id": "x"}, *HISTORY],
        token_budget=10_000,
        output_format="anthropic",
        tokenizer="estimate",
    )
    assert result.payload is not None
    assert result.payload["system"] == "You are Ada.\n\nMode: chat"
    turns = result.payload["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant", "user"]
    assert turns[1]["content"][0] == {
        "type": "tool_use",
        "id": "call_a",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert result.report.dropped == [DroppedRange(0, 1, "leading_assistant")]
    assert [layer.name for layer in result.report.layers if layer.included] == [
        "identity",
        "mode",
    ]
    assert result.report.tokenizer == "estimate"


def test_compression_summary_with_int_ids(client: ContextClient) -> None:
    summary = {"message_ids": [1, 2, 3, 4], "start_message_id": 1, "summary": "Weather talk."}
    result = client.build_messages(
        "Next?", history=HISTORY, compression_summary=summary, token_budget=10_000
    )
    assert result.report.summary_included
    assert result.report.summary_tokens == result.messages[0]["tokens"]
    assert result.messages[0]["role"] == "system"
    assert result.messages[0]["content"].endswith("Weather talk.")
    assert result.report.dropped == [DroppedRange(0, 4, "compressed")]
    assert [HISTORY[i]["id"] for i in result.report.dropped[0].indices] == [1, "2", 3, 4]
    assert [m.get("id") for m in result.messages[1:-1]] == ["5", "6"]


def test_budget_trimming_is_reported(client: ContextClient) -> None:
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": "x" * 40, "id": f"m{i}"}
        for i in range(4)
    ]
    result = client.build_messages("abcd", history=history, token_budget=21, tokenizer="estimate")
    assert [m.get("id") for m in result.messages] == ["m2", "m3", None]
    assert result.report.dropped == [DroppedRange(0, 2, "budget")]
    assert list(result.report.dropped[0].indices) == [0, 1]
    assert [history[i]["id"] for i in result.report.dropped[0].indices] == ["m0", "m1"]
    assert result.report.total_tokens == 21
    assert not result.report.required_over_budget


def test_dropped_ranges_index_the_request_history(client: ContextClient) -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "x" * 40, "id": 10},
        {"role": "assistant", "content": "x" * 40, "id": "a"},
        {"role": "user", "content": "x" * 40},
        {"role": "assistant", "content": " ", "id": "blank"},
        {"role": "user", "content": "x" * 40, "id": "b"},
        {"role": "assistant", "content": "x" * 40, "id": "c"},
    ]
    result = client.build_messages("abcd", history=history, token_budget=21, tokenizer="estimate")
    assert [m.get("id") for m in result.messages] == ["b", "c", None]
    report = result.report
    assert report.dropped == [DroppedRange(0, 3, "budget"), DroppedRange(3, 1, "empty")]
    assert [(i, history[i].get("id"), r.reason) for r in report.dropped for i in r.indices] == [
        (0, 10, "budget"),
        (1, "a", "budget"),
        (2, None, "budget"),
        (3, "blank", "empty"),
    ]
    assert sum(r.count for r in report.dropped) + report.history_kept == len(history)


def test_blank_user_message_is_left_to_the_server(client: ContextClient) -> None:
    # The server continues after tool results when there is no user message ...
    result = client.build_messages("", history=HISTORY[:4], token_budget=10_000)
    assert without_tokens(result.messages) == EXPECTED_HISTORY_OUT[:4]
    assert result.report.user_message_tokens == 0
    # ... and names the field when there is nothing to continue from.
    error = expect_error(lambda: client.build_messages("", history=HISTORY, token_budget=100))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.fields == ["user_message"]


def test_empty_and_orphaned_messages_are_reported(client: ContextClient) -> None:
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": ""},
        {"role": "tool", "tool_call_id": "nobody", "content": "stray"},
    ]
    result = client.build_messages("ok", history=history, token_budget=1000)
    assert result.report.dropped == [
        DroppedRange(1, 1, "empty"),
        DroppedRange(2, 1, "orphaned_tool_result"),
    ]


def test_overflow_policies(client: ContextClient) -> None:
    kept = client.build_messages(
        "Hello there", system_prompt="Be brief.", history=HISTORY[:1], token_budget=3
    )
    assert kept.report.required_over_budget
    assert [m["role"] for m in kept.messages] == ["system", "user"]
    assert kept.report.dropped == [DroppedRange(0, 1, "budget")]
    error = expect_error(
        lambda: client.build_messages(
            "Hello there", system_prompt="Be brief.", token_budget=3, on_overflow="fail"
        )
    )
    assert error.code == grpc.StatusCode.FAILED_PRECONDITION
    assert error.violations == [] and error.fields == []
    assert "token_budget" in error.message


# CountTokens and ListTokenizers -----------------------------------------------------


def test_count_tokens(client: ContextClient) -> None:
    count = client.count_tokens(
        ["hello world", "", "héllo"],
        [
            {"role": "user", "content": "abcdefgh"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}
                ],
            },
        ],
        tokenizer="estimate",
    )
    assert isinstance(count, TokenCount)
    assert count.tokenizer == "estimate"
    assert count.text_tokens == [3, 0, 2]
    assert count.message_tokens == [2, 2]  # "f" and "{}": one token each
    assert count.total_tokens == 9


def test_count_tokens_accepts_one_string_and_counts_overhead(client: ContextClient) -> None:
    one = client.count_tokens("hello world", tokenizer="estimate")
    assert one.text_tokens == [3]
    tiktoken = client.count_tokens(
        "hello world", [{"role": "user", "content": "hello world"}], tokenizer="cl100k_base"
    )
    assert tiktoken.text_tokens == [2]
    assert tiktoken.message_tokens == [5]
    empty = client.count_tokens()
    assert empty.total_tokens == 0 and empty.text_tokens == [] and empty.message_tokens == []


def test_list_tokenizers(client: ContextClient) -> None:
    tokenizers = client.list_tokenizers()
    assert isinstance(tokenizers, TokenizerList)
    assert tokenizers.default == "cl100k_base"
    assert tokenizers.names[:2] == ["estimate", "cl100k_base"]
    by_name = {t.name: t for t in tokenizers.tokenizers}
    assert by_name["estimate"].available and by_name["estimate"].message_overhead == 0
    assert by_name["cl100k_base"].available and by_name["cl100k_base"].message_overhead == 3
    assert all(t.description for t in tokenizers.tokenizers)


# Context editing --------------------------------------------------------------------


def test_build_messages_with_editing(client: ContextClient) -> None:
    calls = [{"id": f"c{k}", "name": "search", "arguments": "{}"} for k in range(3)]
    history: list[dict[str, Any]] = [{"role": "user", "content": "find"}]
    for call in calls:
        history.append({"role": "assistant", "content": "", "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": call["id"], "content": "word " * 400})
    built = client.build_messages(
        "next",
        token_budget=10_000,
        history=history,
        tokenizer="estimate",
        editing={
            "tool_result_cap_tokens": 100,
            "clear_trigger_tokens": 1,
            "keep_tool_results": 1,
            "clear_at_least_tokens": 0,
        },
    )
    assert [(e.index, e.kind, e.tool_call_id) for e in built.report.edits] == [
        (2, "cleared", "c0"),
        (4, "cleared", "c1"),
        (6, "capped", "c2"),
    ]
    capped = built.report.edits[-1]
    assert isinstance(capped, contextd_client.MessageEdit)
    assert capped.tokens_before == 500 and capped.tokens_after <= 100
    assert built.messages[2]["content"] == (
        "[tool result cleared to save context: search, call c0, 500 tokens]"
    )
    assert built.report.cache_prefix_kept_tokens < built.report.total_tokens
    error = expect_error(
        lambda: client.build_messages("x", token_budget=100, editing={"keep_tool_results": -1})
    )
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.fields == ["editing.keep_tool_results"]

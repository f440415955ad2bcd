"""Bad BuildMessages requests (SDK dict form) and the fields the error must name."""

from __future__ import annotations

from typing import Any

OK: dict[str, Any] = {
    "system_prompt": "sys",
    "history": [{"role": "user", "content": "hi"}],
    "user_message": "hello",
    "token_budget": 100,
    "tokenizer": "estimate",
}


def bad(**changes: Any) -> dict[str, Any]:
    return {**OK, **changes}


def call(tool_id: str = "c1", name: str = "f", arguments: str = "{}") -> dict[str, Any]:
    return {"id": tool_id, "name": name, "arguments": arguments}


def assistant(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": list(calls)}


BAD_BUILD: list[tuple[str, dict[str, Any], list[str]]] = [
    ("empty request", {"token_budget": 0}, ["user_message", "token_budget"]),
    ("zero budget", bad(token_budget=0), ["token_budget"]),
    ("negative budget", bad(token_budget=-5), ["token_budget"]),
    ("blank user message, no history", bad(user_message="  ", history=[]), ["user_message"]),
    (
        "blank user message, history not ending in tool results",
        bad(user_message=""),
        ["user_message"],
    ),
    (
        "system message in history",
        bad(history=[{"role": "system", "content": "x"}]),
        ["history[0].role"],
    ),
    (
        "tool message without call id",
        bad(history=[assistant(call()), {"role": "tool", "content": "r"}]),
        ["history[1].tool_call_id"],
    ),
    (
        "tool call id on a user message",
        bad(history=[{"role": "user", "content": "x", "tool_call_id": "c1"}]),
        ["history[0].tool_call_id"],
    ),
    (
        "tool call without id",
        bad(history=[assistant(call(tool_id=""))]),
        ["history[0].tool_calls[0].id"],
    ),
    (
        "tool call without name",
        bad(history=[assistant(call(name=""))]),
        ["history[0].tool_calls[0].name"],
    ),
    (
        "tool call with a bad name",
        bad(history=[assistant(call(name="run command"))]),
        ["history[0].tool_calls[0].name"],
    ),
    (
        "tool call arguments not JSON",
        bad(history=[assistant(call(arguments="{oops"))]),
        ["history[0].tool_calls[0].arguments"],
    ),
    (
        "tool call arguments not an object",
        bad(history=[assistant(call(arguments="[1]"))]),
        ["history[0].tool_calls[0].arguments"],
    ),
    (
        "duplicate tool call id",
        bad(history=[assistant(call(), call())]),
        ["history[0].tool_calls[1].id"],
    ),
    (
        "tool calls on a user message",
        bad(history=[{"role": "user", "content": "x", "tool_calls": [call()]}]),
        ["history[0].tool_calls"],
    ),
    (
        "duplicate message id",
        bad(
            history=[
                {"id": "a", "role": "user", "content": "x"},
                {"id": "a", "role": "assistant", "content": "y"},
            ]
        ),
        ["history[1].id"],
    ),
    ("unknown tokenizer", bad(tokenizer="gpt-17"), ["tokenizer"]),
    (
        "summary start id not in history",
        bad(
            history=[{"id": "1", "role": "user", "content": "x"}],
            compression_summary={"message_ids": ["9"], "start_message_id": "9", "summary": "s"},
        ),
        ["compression_summary.start_message_id"],
    ),
    (
        "summary start id not among its ids",
        bad(
            history=[{"id": "1", "role": "user", "content": "x"}],
            compression_summary={"message_ids": ["2"], "start_message_id": "1", "summary": "s"},
        ),
        ["compression_summary.start_message_id"],
    ),
    (
        "blank summary",
        bad(
            history=[{"id": "1", "role": "user", "content": "x"}],
            compression_summary={"message_ids": ["1"], "start_message_id": "1", "summary": " "},
        ),
        ["compression_summary.summary"],
    ),
    (
        "layers and system prompt both",
        bad(layers={"identity": "me"}),
        ["layers"],
    ),
    (
        "layers with blank identity",
        bad(system_prompt=None, layers={"identity": " "}),
        ["layers.identity"],
    ),
]

"""Acceptance scenarios as data, run against core/ and the live server: the budget rule,
the prompt layers, and the message pipeline.

Each build case is a request in the SDK's plain-dict form plus a check over the
result's messages (role/content/tool dicts) and report fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Messages = list[dict[str, Any]]


@dataclass(frozen=True)
class BuildCase:
    name: str
    request: dict[str, Any]
    check: Callable[[Messages, Any], None]


def ranges(report: Any) -> list[tuple[int, int, str]]:
    """The report's dropped ranges as (start index, count, reason)."""
    return [(d.start_index, d.count, str(d.reason)) for d in report.dropped]


def plain(messages: Messages) -> Messages:
    """Messages without output-only fields, for exact comparison."""
    return [{k: v for k, v in m.items() if k not in ("tokens", "id")} for m in messages]


# --- the budget rule: [system, ...history, user] under a token budget -----------------------------


def _everything_fits(messages: Messages, report: Any) -> None:
    assert plain(messages) == [
        {"role": "system", "content": "<identity>AI</identity>"},
        {"role": "user", "content": "介绍林默"},
        {"role": "assistant", "content": "林默是28岁侦探"},
        {"role": "user", "content": "他的性格？"},
    ]


def _oldest_trimmed(messages: Messages, report: Any) -> None:
    # system and current cost 1 each; the remaining 2 tokens go to the newest history.
    assert plain(messages) == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "CCCC"},
        {"role": "assistant", "content": "DDDD"},
        {"role": "user", "content": "E"},
    ]
    assert ranges(report) == [(0, 2, "budget")]
    assert report.total_tokens == 4


def _empty_history(messages: Messages, report: Any) -> None:
    assert plain(messages) == [
        {"role": "system", "content": "system text"},
        {"role": "user", "content": "你好"},
    ]


REQUIRED_SYSTEM = "s" * 400  # 100 tokens under the estimator
REQUIRED_USER = "u" * 200  # 50 tokens
REQUIRED_HISTORY = [
    {"role": "user" if i % 2 == 0 else "assistant", "content": f"history message {i:02d}"}
    for i in range(10)
]  # 19 bytes each: 5 tokens


def _required_kept(messages: Messages, report: Any) -> None:
    # 160 - 100 - 50 = 10 tokens: the two newest history messages (5 each) fit.
    assert messages[0] == {"role": "system", "content": REQUIRED_SYSTEM, "tokens": 100}
    assert plain(messages[1:-1]) == REQUIRED_HISTORY[-2:]
    assert messages[-1]["role"] == "user" and messages[-1]["content"] == REQUIRED_USER
    assert report.history_kept == 2 and report.total_tokens == 160
    assert not report.required_over_budget


def _over(messages: Messages, report: Any) -> None:
    # Rule 4: system + current alone exceed the budget: both kept, all history dropped.
    assert plain(messages) == [
        {"role": "system", "content": REQUIRED_SYSTEM},
        {"role": "user", "content": REQUIRED_USER},
    ]
    assert report.required_over_budget
    assert ranges(report) == [(0, 10, "budget")]


BUDGET_CASES: list[BuildCase] = [
    BuildCase(
        "budget-everything-fits",
        {
            "system_prompt": "<identity>AI</identity>",
            "history": [
                {"role": "user", "content": "介绍林默"},
                {"role": "assistant", "content": "林默是28岁侦探"},
            ],
            "user_message": "他的性格？",
            "token_budget": 10000,
            "tokenizer": "estimate",
        },
        _everything_fits,
    ),
    BuildCase(
        "budget-trims-the-oldest",
        {
            "system_prompt": "S",
            "history": [
                {"role": "user", "content": "AAAA"},
                {"role": "assistant", "content": "BBBB"},
                {"role": "user", "content": "CCCC"},
                {"role": "assistant", "content": "DDDD"},
            ],
            "user_message": "E",
            "token_budget": 4,
            "tokenizer": "estimate",
        },
        _oldest_trimmed,
    ),
    BuildCase(
        "budget-empty-history",
        {
            "system_prompt": "system text",
            "history": [],
            "user_message": "你好",
            "token_budget": 10000,
            "tokenizer": "estimate",
        },
        _empty_history,
    ),
    BuildCase(
        "budget-keeps-system-and-user",
        {
            "system_prompt": REQUIRED_SYSTEM,
            "history": REQUIRED_HISTORY,
            "user_message": REQUIRED_USER,
            "token_budget": 160,
            "tokenizer": "estimate",
        },
        _required_kept,
    ),
    BuildCase(
        "budget-required-over-budget",
        {
            "system_prompt": REQUIRED_SYSTEM,
            "history": REQUIRED_HISTORY,
            "user_message": REQUIRED_USER,
            "token_budget": 120,
            "tokenizer": "estimate",
        },
        _over,
    ),
]

# The estimator: "" -> 0, else max(1, ceil(utf8 bytes / 4)).
ESTIMATES = [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("你好", 2), ("他的性格？", 4)]

# --- the six prompt layers, in order, blank ones skipped ------------------------------------------

LAYERS_ALL = {
    "identity": "<identity>AI</identity>",
    "rules": "规则：不写暴力内容",
    "skill": "你是续写助手，从光标处继续写作",
    "mode": "Mode: agent",
    "memory": "用户偏好：简洁风格",
    "context": "当前角色：林默正在调查案件",
}
LAYERS_IDENTITY_ONLY = {"identity": "<identity>AI</identity>"}
LAYERS_BLANKS = {"identity": "<identity>AI</identity>", "rules": "  ", "skill": "", "memory": "\n"}


def check_prompt_all_layers(prompt: str) -> None:
    marks = ["<identity>", "规则", "续写助手", "Mode: agent", "简洁风格", "林默"]
    positions = [prompt.index(m) for m in marks]
    assert positions == sorted(positions)
    assert prompt == "\n\n".join(LAYERS_ALL.values())


def check_prompt_identity_only(prompt: str) -> None:
    assert prompt == "<identity>AI</identity>"
    assert "\n\n\n\n" not in prompt


# --- the message pipeline: a worked example with tool calls and a compression summary -------------

PIPELINE_HISTORY = [
    {"id": 1, "role": "user", "content": "执行命令 ls"},
    {
        "id": 2,
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "call_1", "name": "execute_command", "arguments": '{"cmd": "ls"}'}],
    },
    {"id": 3, "role": "tool", "tool_call_id": "call_1", "content": "README.md\nsrc"},
    {"id": 4, "role": "assistant", "content": "命令执行完成"},
    {"id": 5, "role": "user", "content": "再执行 pwd"},
    {
        "id": 6,
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "call_2", "name": "execute_command", "arguments": '{"cmd": "pwd"}'}],
    },
    {"id": 7, "role": "tool", "tool_call_id": "call_2", "content": "/home/user"},
    {"id": 8, "role": "assistant", "content": ""},
]
PIPELINE_SUMMARY = {
    "message_ids": [1, 2, 3, 4],
    "start_message_id": 1,
    "summary": "用户执行了 ls 命令，查看了目录内容",
}
PIPELINE_PROMPTS = ["You are a helpful assistant.", "Answer in the user's language."]


def _pipeline_example(messages: Messages, report: Any) -> None:
    assert plain(messages) == [
        {
            "role": "system",
            "content": "You are a helpful assistant.\nAnswer in the user's language.",
        },
        {
            "role": "system",
            "content": "[Previous conversation summary]\n\n用户执行了 ls 命令，查看了目录内容",
        },
        {"role": "user", "content": "再执行 pwd"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_2", "name": "execute_command", "arguments": '{"cmd": "pwd"}'}
            ],
        },
        {"role": "tool", "content": "/home/user", "tool_call_id": "call_2"},
    ]
    assert ranges(report) == [(0, 4, "compressed"), (7, 1, "empty")]
    assert report.summary_included


def _orphan_dropped(messages: Messages, report: Any) -> None:
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert ranges(report) == [(1, 1, "orphaned_tool_result")]


PIPELINE_CASES: list[BuildCase] = [
    BuildCase(
        "pipeline-tool-calls-and-summary",
        {
            "system_prompt": PIPELINE_PROMPTS,
            "history": PIPELINE_HISTORY,
            "compression_summary": PIPELINE_SUMMARY,
            "user_message": "",
            "token_budget": 10000,
        },
        _pipeline_example,
    ),
    BuildCase(
        "pipeline-orphaned-tool-message",
        {
            "system_prompt": "sys",
            "history": [
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "call_9", "content": "stale result"},
                {"role": "assistant", "content": "hello"},
            ],
            "user_message": "next",
            "token_budget": 1000,
        },
        _orphan_dropped,
    ),
]

BUILD_CASES = BUDGET_CASES + PIPELINE_CASES

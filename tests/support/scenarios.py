"""The scenarios of seeds 000, 001 and 002 as data, run against core/ and the live server.

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


# --- seed 000: buildLLMMessages -------------------------------------------------------------


def _s1(messages: Messages, report: Any) -> None:
    assert plain(messages) == [
        {"role": "system", "content": "<identity>AI</identity>"},
        {"role": "user", "content": "介绍林默"},
        {"role": "assistant", "content": "林默是28岁侦探"},
        {"role": "user", "content": "他的性格？"},
    ]


def _s2(messages: Messages, report: Any) -> None:
    # system and current cost 1 each; the remaining 2 tokens go to the newest history.
    assert plain(messages) == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "CCCC"},
        {"role": "assistant", "content": "DDDD"},
        {"role": "user", "content": "E"},
    ]
    assert ranges(report) == [(0, 2, "budget")]
    assert report.total_tokens == 4


def _s3(messages: Messages, report: Any) -> None:
    assert plain(messages) == [
        {"role": "system", "content": "system text"},
        {"role": "user", "content": "你好"},
    ]


S4_SYSTEM = "s" * 400  # 100 tokens under the estimator
S4_USER = "u" * 200  # 50 tokens
S4_HISTORY = [
    {"role": "user" if i % 2 == 0 else "assistant", "content": f"history message {i:02d}"}
    for i in range(10)
]  # 19 bytes each: 5 tokens


def _s4(messages: Messages, report: Any) -> None:
    # 160 - 100 - 50 = 10 tokens: the two newest history messages (5 each) fit.
    assert messages[0] == {"role": "system", "content": S4_SYSTEM, "tokens": 100}
    assert plain(messages[1:-1]) == S4_HISTORY[-2:]
    assert messages[-1]["role"] == "user" and messages[-1]["content"] == S4_USER
    assert report.history_kept == 2 and report.total_tokens == 160
    assert not report.required_over_budget


def _over(messages: Messages, report: Any) -> None:
    # Rule 4: system + current alone exceed the budget: both kept, all history dropped.
    assert plain(messages) == [
        {"role": "system", "content": S4_SYSTEM},
        {"role": "user", "content": S4_USER},
    ]
    assert report.required_over_budget
    assert ranges(report) == [(0, 10, "budget")]


SEED_000: list[BuildCase] = [
    BuildCase(
        "000-S1-standard",
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
        _s1,
    ),
    BuildCase(
        "000-S2-trim-oldest",
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
        _s2,
    ),
    BuildCase(
        "000-S3-empty-history",
        {
            "system_prompt": "system text",
            "history": [],
            "user_message": "你好",
            "token_budget": 10000,
            "tokenizer": "estimate",
        },
        _s3,
    ),
    BuildCase(
        "000-S4-keep-required",
        {
            "system_prompt": S4_SYSTEM,
            "history": S4_HISTORY,
            "user_message": S4_USER,
            "token_budget": 160,
            "tokenizer": "estimate",
        },
        _s4,
    ),
    BuildCase(
        "000-rule4-required-over-budget",
        {
            "system_prompt": S4_SYSTEM,
            "history": S4_HISTORY,
            "user_message": S4_USER,
            "token_budget": 120,
            "tokenizer": "estimate",
        },
        _over,
    ),
]

# estimateMessageTokens: "" -> 0, else max(1, ceil(utf8 bytes / 4)).
ESTIMATES = [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("你好", 2), ("他的性格？", 4)]

# --- seed 001: assembleSystemPrompt ---------------------------------------------------------

LAYERS_S1 = {
    "identity": "<identity>AI</identity>",
    "rules": "规则：不写暴力内容",
    "skill": "你是续写助手，从光标处继续写作",
    "mode": "Mode: agent",
    "memory": "用户偏好：简洁风格",
    "context": "当前角色：林默正在调查案件",
}
LAYERS_S2 = {"identity": "<identity>AI</identity>"}
LAYERS_S3 = {"identity": "<identity>AI</identity>", "rules": "  ", "skill": "", "memory": "\n"}


def check_prompt_s1(prompt: str) -> None:
    marks = ["<identity>", "规则", "续写助手", "Mode: agent", "简洁风格", "林默"]
    positions = [prompt.index(m) for m in marks]
    assert positions == sorted(positions)
    assert prompt == "\n\n".join(LAYERS_S1.values())


def check_prompt_s2_s3(prompt: str) -> None:
    assert prompt == "<identity>AI</identity>"
    assert "\n\n\n\n" not in prompt


# --- seed 002: RequestMessageBuilder, the whole worked example -----------------------------

SEED_002_HISTORY = [
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
SEED_002_SUMMARY = {
    "message_ids": [1, 2, 3, 4],
    "start_message_id": 1,
    "summary": "用户执行了 ls 命令，查看了目录内容",
}
SEED_002_PROMPTS = ["You are a helpful assistant.", "Answer in the user's language."]


def _seed_002(messages: Messages, report: Any) -> None:
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


def _seed_002_orphan(messages: Messages, report: Any) -> None:
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert ranges(report) == [(1, 1, "orphaned_tool_result")]


SEED_002: list[BuildCase] = [
    BuildCase(
        "002-worked-example",
        {
            "system_prompt": SEED_002_PROMPTS,
            "history": SEED_002_HISTORY,
            "compression_summary": SEED_002_SUMMARY,
            "user_message": "",
            "token_budget": 10000,
        },
        _seed_002,
    ),
    BuildCase(
        "002-orphaned-tool-message",
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
        _seed_002_orphan,
    ),
]

BUILD_CASES = SEED_000 + SEED_002

"""Bad Messages requests: each refused with a 400 in Anthropic's shape whose message
names the parameter as the request spelled it (native refusals translated back), and
nothing stored."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.anthropic_http.conftest import MODEL, VERSION, base_url
from tests.openai_http.conftest import Served

USER = {"role": "user", "content": "hi"}
OK: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 50,
    "messages": [USER],
    "metadata": {"user_id": "ann"},
}
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
EDIT = {"type": "clear_tool_uses_20250919"}
THINKING = {"type": "clear_thinking_20251015"}


def TURNS(n: int) -> dict[str, Any]:
    return {"type": "thinking_turns", "value": n}


CASES: list[tuple[str, dict[str, Any], str]] = [
    ("no max_tokens", {k: v for k, v in OK.items() if k != "max_tokens"}, "max_tokens"),
    ("zero max_tokens", {**OK, "max_tokens": 0}, "max_tokens"),
    ("temperature", {**OK, "temperature": 1.5}, "temperature"),
    ("unknown key", {**OK, "frobnicate": 1}, "frobnicate"),
    ("no messages", {**OK, "messages": []}, "messages"),
    ("role", {**OK, "messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
    ("system only", {**OK, "messages": [{"role": "system", "content": "x"}]}, "messages"),
    (
        "system clear_at",
        {**OK, "messages": [USER, {"role": "system", "content": "x", "clear_at": "later"}]},
        "messages[1].clear_at",
    ),
    (
        "system message block",
        {**OK, "messages": [USER, {"role": "system", "content": [{"type": "image"}]}]},
        "messages[1].content[0].type",
    ),
    (
        "system key",
        {**OK, "messages": [USER, {"role": "system", "content": "x", "name": "n"}]},
        "messages[1].name",
    ),
    (
        "prefill",
        {**OK, "messages": [USER, {"role": "assistant", "content": "So"}]},
        "messages[1].role",
    ),
    (
        "block type",
        {**OK, "messages": [{"role": "user", "content": [{"type": "document"}]}]},
        "messages[0].content[0].type",
    ),
    (
        "tool_use from a user",
        {**OK, "messages": [{"role": "user", "content": [TOOL_USE]}]},
        "messages[0].content[0].type",
    ),
    (
        "image media type",
        {
            **OK,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "text/html", "data": ""},
                        }
                    ],
                }
            ],
        },
        "messages[0].content[0].source.media_type",
    ),
    (
        "tool input",
        {
            **OK,
            "messages": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [{**TOOL_USE, "input": "[]"}]},
                USER,
            ],
        },
        "messages[1].content[0].input",
    ),
    (
        "bad tool name (native)",
        {**OK, "tools": [{"name": "bad name!", "input_schema": {"type": "object"}}]},
        "tools[0].name",
    ),
    (
        "server tool",
        {**OK, "tools": [{"type": "web_search_20250305", "name": "w"}]},
        "tools[0].type",
    ),
    (
        "tool_choice names no tool (native)",
        {**OK, "tool_choice": {"type": "tool", "name": "nothing"}},
        "tool_choice.name",
    ),
    (
        "output format",
        {**OK, "output_config": {"format": {"type": "json_schema", "schema": []}}},
        "output_config.format.schema",
    ),
    ("tool_choice type", {**OK, "tool_choice": {"type": "maybe"}}, "tool_choice.type"),
    ("container", {**OK, "container": "c"}, "container"),
    ("system block", {**OK, "system": [{"type": "image"}]}, "system[0].type"),
    ("metadata", {**OK, "metadata": {"user_id": 5}}, "metadata.user_id"),
    ("stop", {**OK, "stop_sequences": "END"}, "stop_sequences"),
    (
        "edit type",
        {**OK, "context_management": {"edits": [{"type": "compact_20260112"}]}},
        "context_management.edits[0].type",
    ),
    (
        "edit trigger type",
        {**OK, "context_management": {"edits": [{**EDIT, "trigger": {"type": "turns"}}]}},
        "context_management.edits[0].trigger.type",
    ),
    (
        "edit trigger zero",
        {
            **OK,
            "context_management": {
                "edits": [{**EDIT, "trigger": {"type": "tool_uses", "value": 0}}]
            },
        },
        "context_management.edits[0].trigger.value",
    ),
    (
        "edit twice",
        {**OK, "context_management": {"edits": [EDIT, EDIT]}},
        "context_management.edits[1].type",
    ),
    (
        "thinking edit not first",
        {**OK, "context_management": {"edits": [EDIT, THINKING]}},
        "context_management.edits[1].type",
    ),
    (
        "thinking keep zero",
        {**OK, "context_management": {"edits": [{**THINKING, "keep": TURNS(0)}]}},
        "context_management.edits[0].keep.value",
    ),
    (
        "thinking keep word",
        {**OK, "context_management": {"edits": [{**THINKING, "keep": "some"}]}},
        "context_management.edits[0].keep",
    ),
    (
        "thinking keep type",
        {**OK, "context_management": {"edits": [{**THINKING, "keep": {"type": "turns"}}]}},
        "context_management.edits[0].keep.type",
    ),
    (
        "thinking keep key",
        {**OK, "context_management": {"edits": [{**THINKING, "trigger": TURNS(1)}]}},
        "context_management.edits[0].trigger",
    ),
    (
        "thinking text",
        {
            **OK,
            "context_management": {"edits": [THINKING]},
            "messages": [
                USER,
                {"role": "assistant", "content": [{"type": "thinking", "thinking": 7}]},
                USER,
            ],
        },
        "messages[1].content[0].thinking",
    ),
    (
        "edit inputs list",
        {"context_management": {"edits": [{**EDIT, "clear_tool_inputs": ["a"]}]}, **OK},
        "context_management.edits[0].clear_tool_inputs",
    ),
    (
        "edit excluded tool (native)",
        {**OK, "context_management": {"edits": [{**EDIT, "exclude_tools": ["no way"]}]}},
        "context_management.edits[0].exclude_tools[0]",
    ),
]


@pytest.mark.parametrize(("body", "param"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_field_is_named(served: Served, body: dict[str, Any], param: str) -> None:
    before = len(served.sessions("ann"))
    answer = httpx.post(
        f"{base_url(served)}/v1/messages",
        json=body,
        headers={"x-api-key": "unused", **VERSION},
        timeout=30,
    )
    assert answer.status_code == 400, answer.text
    error = answer.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith(f"{param}:") or param in error["error"]["message"]
    assert len(served.sessions("ann")) == before


EDIT_CASES = [c for c in CASES if "context_management" in c[1]]


@pytest.mark.parametrize(
    ("body", "param"), [c[1:] for c in EDIT_CASES], ids=[c[0] for c in EDIT_CASES]
)
def test_count_tokens_refuses_the_same_edits(
    served: Served, body: dict[str, Any], param: str
) -> None:
    counted = {k: v for k, v in body.items() if k in ("model", "messages", "context_management")}
    answer = httpx.post(
        f"{base_url(served)}/v1/messages/count_tokens",
        json=counted,
        headers={"x-api-key": "unused", **VERSION},
        timeout=30,
    )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(f"{param}:") or param in error["message"]


@pytest.mark.parametrize(
    ("content_type", "raw", "status"),
    [
        ("application/json", b"{not json", 400),
        ("application/json", b"[1]", 400),
        ("text/plain", b"{}", 415),
    ],
)
def test_a_body_that_is_not_a_json_object(
    served: Served, content_type: str, raw: bytes, status: int
) -> None:
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        answer = httpx.post(
            f"{base_url(served)}{path}",
            content=raw,
            headers={"content-type": content_type, "x-api-key": "unused", **VERSION},
        )
        assert answer.status_code == status
        assert answer.json()["type"] == "error"


def test_a_body_over_the_limit_is_413(served: Served) -> None:
    answer = httpx.post(
        f"{base_url(served)}/v1/messages",
        json={**OK, "messages": [{"role": "user", "content": "x" * 2_000_000}]},
        headers={"x-api-key": "unused", **VERSION},
    )
    assert answer.status_code == 413
    assert answer.json()["error"]["type"] == "request_too_large"

"""Small helpers for the Python SDK tests."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest
from contextd_client import (
    ContextdError,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def expect_error(call: Callable[[], object]) -> ContextdError:
    with pytest.raises(ContextdError) as info:
        call()
    return info.value


# A history with every shape of tool call the SDK accepts, and ids as ints and strings.
HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Paris and Rome?", "id": 1},
    {
        "role": "assistant",
        "content": None,
        "id": "2",
        "tool_calls": [
            {  # OpenAI-shaped, arguments as JSON text
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            },
            {  # OpenAI-shaped, arguments as a dict
                "id": "call_b",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Rome"}},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "18 C", "id": 3},
    {"role": "tool", "tool_call_id": "call_b", "content": "24 C", "id": 4},
    {
        "role": "assistant",
        "content": "Checking the forecast.",
        "id": 5,
        # Neutral shape, arguments as a dict; nothing answers it, so the server removes it.
        "tool_calls": [{"id": "call_c", "name": "forecast", "arguments": {"days": 2}}],
    },
    {"role": "assistant", "content": "Paris 18 C, Rome 24 C.", "id": 6},
]


EXPECTED_HISTORY_OUT: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Paris and Rome?", "id": "1"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_a", "name": "get_weather", "arguments": '{"city": "Paris"}'},
            {"id": "call_b", "name": "get_weather", "arguments": '{"city":"Rome"}'},
        ],
        "id": "2",
    },
    {"role": "tool", "content": "18 C", "tool_call_id": "call_a", "id": "3"},
    {"role": "tool", "content": "24 C", "tool_call_id": "call_b", "id": "4"},
    {"role": "assistant", "content": "Checking the forecast.", "id": "5"},
    {"role": "assistant", "content": "Paris 18 C, Rome 24 C.", "id": "6"},
]


def without_tokens(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != "tokens"} for m in messages]

"""A native turn's events into Chat Completions objects: the whole ``chat.completion``,
or its ``chat.completion.chunk`` pieces for a stream.

Besides OpenAI's fields each object may carry ``contextd``, an extension field the SDKs
keep (their models allow extra fields): the session and turn, the stored message ids,
and the context report (``BuildReport`` in the protobuf JSON mapping).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from contextd.fronts.chat_http.failure import HttpFailure
from contextd.fronts.chat_http.turn import (
    EXTENSION,
    SESSION_ID_HEADER,
    ended_extension,
    started_extension,
    turn_failure,
)
from contextd.v1 import chat_pb2 as cpb

_FINISH = {
    cpb.TURN_STATUS_OK: "stop",
    cpb.TURN_STATUS_REQUIRES_ACTION: "tool_calls",
    # Stopped at --max-steps without an answer: the closest of OpenAI's reasons.
    cpb.TURN_STATUS_MAX_STEPS: "length",
}


@dataclass
class Completion:
    """One answer being put together from the turn's events."""

    session_mode: bool
    started: cpb.TurnStarted
    id: str = field(default_factory=lambda: "chatcmpl-" + secrets.token_hex(12))
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def model(self) -> str:
        return self.started.model

    def headers(self) -> dict[str, str]:
        return {SESSION_ID_HEADER: self.started.session_id, "X-Request-Id": self.id}

    def started_extension(self) -> dict[str, Any]:
        return started_extension(self.session_mode, self.started)

    def failure(self, done: cpb.TurnCompleted) -> HttpFailure | None:
        return turn_failure(done, self.session_mode, self.headers())

    def whole(self, done: cpb.TurnCompleted) -> dict[str, Any]:
        """The ``chat.completion`` of a turn that ended with ``done``."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": done.final_text or (None if done.pending_tool_calls else ""),
            "refusal": None,
        }
        if done.pending_tool_calls:
            message["tool_calls"] = [_tool_call(call) for call in done.pending_tool_calls]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": _FINISH.get(done.status, "stop"),
                    "logprobs": None,
                }
            ],
            "usage": usage(done.turn_usage),
            EXTENSION: {**self.started_extension(), **ended_extension(done)},
        }

    def chunk(
        self,
        delta: dict[str, Any] | None,
        finish_reason: str | None = None,
        include_usage: bool = False,
        extension: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One ``chat.completion.chunk``; ``delta`` None for the usage chunk (no choices)."""
        out: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
        }
        if include_usage:
            out["usage"] = None
        if extension is not None:
            out[EXTENSION] = extension
        return out

    def first_chunk(self, include_usage: bool) -> dict[str, Any]:
        return self.chunk(
            {"role": "assistant", "content": ""},
            include_usage=include_usage,
            extension=self.started_extension(),
        )

    def last_chunks(self, done: cpb.TurnCompleted, include_usage: bool) -> list[dict[str, Any]]:
        """The host tool calls (whole, one delta each), the finish, and the usage."""
        chunks = []
        if done.pending_tool_calls:
            calls = [
                {"index": i, **_tool_call(call)} for i, call in enumerate(done.pending_tool_calls)
            ]
            chunks.append(self.chunk({"tool_calls": calls}, include_usage=include_usage))
        chunks.append(
            self.chunk(
                {},
                _FINISH.get(done.status, "stop"),
                include_usage=include_usage,
                extension=ended_extension(done),
            )
        )
        if include_usage:
            last = self.chunk(None)
            last["usage"] = usage(done.turn_usage)
            chunks.append(last)
        return chunks


def usage(u: cpb.TokenUsage) -> dict[str, Any]:
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens},
    }


def _tool_call(call: Any) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments or "{}"},
    }

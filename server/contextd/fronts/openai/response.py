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

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from contextd.fronts.openai.errors import OpenAIError, retry_advice
from contextd.v1 import chat_pb2 as cpb

EXTENSION = "contextd"
SESSION_ID_HEADER = "X-Contextd-Session-Id"

_FINISH = {
    cpb.TURN_STATUS_OK: "stop",
    cpb.TURN_STATUS_REQUIRES_ACTION: "tool_calls",
    # Stopped at --max-steps without an answer: the closest of OpenAI's reasons.
    cpb.TURN_STATUS_MAX_STEPS: "length",
}
_STATUS = {
    cpb.TURN_STATUS_OK: "ok",
    cpb.TURN_STATUS_REQUIRES_ACTION: "requires_action",
    cpb.TURN_STATUS_MAX_STEPS: "max_steps",
    cpb.TURN_STATUS_CANCELLED: "cancelled",
    cpb.TURN_STATUS_ERROR: "error",
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
        started = self.started
        return {
            "mode": "session" if self.session_mode else "inline",
            "session_id": started.session_id,
            "turn_index": started.turn_index,
            "user_message_id": started.user_message_id,
            "prompt_tokens_estimate": started.prompt_tokens_estimate,
            "prompt_tokens_warning": started.prompt_tokens_warning,
            "provider": started.provider,
            "report": report_json(started.context),
        }

    def failure(self, done: cpb.TurnCompleted) -> OpenAIError | None:
        """The error a turn that failed after it started is answered with; None when it
        produced an answer. A session-mode turn stored its user message: a retry would
        store it twice, so the SDKs are told not to retry."""
        if done.status == cpb.TURN_STATUS_ERROR:
            status, kind, code = 502, "api_error", "provider_error"
            message = done.error_message or "the model provider failed"
        elif done.status == cpb.TURN_STATUS_CANCELLED:
            status, kind, code = 503, "server_error", "turn_cancelled"
            message = "the turn was cancelled before it ended"
        else:
            return None
        headers = retry_advice(self.headers(), allowed=not self.session_mode)
        # The native call itself ended OK: the turn's status says how it failed.
        return OpenAIError(status, message, kind, None, code, headers, grpc.StatusCode.OK)

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
            EXTENSION: {**self.started_extension(), **_ended(done)},
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
                extension=_ended(done),
            )
        )
        if include_usage:
            last = self.chunk(None)
            last["usage"] = usage(done.turn_usage)
            chunks.append(last)
        return chunks


def report_json(report: Message) -> dict[str, Any]:
    """The report with every field, zeros and empty lists included (the JSON mapping
    would leave them out)."""
    found: dict[str, Any] = json_format.MessageToDict(
        report, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return found


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


def _ended(done: cpb.TurnCompleted) -> dict[str, Any]:
    return {
        "assistant_message_id": done.assistant_message_id,
        "status": _STATUS.get(done.status, "unknown"),
        "estimated_usage": done.turn_usage.estimated,
    }

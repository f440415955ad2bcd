"""A native turn's events into Anthropic's Message, whole or as the stream's events
(``message_start``, ``ping``, ``content_block_start``/``delta``/``stop``,
``message_delta`` with the usage, ``message_stop``).

The text of the turn is the first content block, its host tool calls ``tool_use``
blocks after it. Besides Anthropic's fields the message carries ``contextd`` (the
session and turn, the stored message ids, the context report), which the SDKs keep, and
``context_management`` when the request asked for an edit.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from contextd.fronts.anthropic.editing import applied_edits
from contextd.fronts.anthropic.request import MessagesRequest
from contextd.fronts.chat_http.failure import HttpFailure
from contextd.fronts.chat_http.front import json_text
from contextd.fronts.chat_http.turn import (
    EXTENSION,
    SESSION_ID_HEADER,
    ended_extension,
    report_summary,
    started_extension,
    turn_failure,
)
from contextd.v1 import chat_pb2 as cpb

REPORT_HEADER = "X-Contextd-Report"
REQUEST_ID_HEADER = "request-id"
_STOP = {
    cpb.TURN_STATUS_OK: "end_turn",
    cpb.TURN_STATUS_REQUIRES_ACTION: "tool_use",
    # Stopped at --max-steps without an answer: the closest of Anthropic's reasons.
    cpb.TURN_STATUS_MAX_STEPS: "max_tokens",
}


@dataclass
class Reply:
    """One answer being put together from the turn's events."""

    request: MessagesRequest
    started: cpb.TurnStarted
    id: str = field(default_factory=lambda: "msg_" + secrets.token_hex(12))

    def headers(self) -> dict[str, str]:
        return {
            SESSION_ID_HEADER: self.started.session_id,
            REQUEST_ID_HEADER: self.id,
            REPORT_HEADER: json_text(report_summary(self.started.context)),
        }

    def failure(self, done: cpb.TurnCompleted) -> HttpFailure | None:
        return turn_failure(done, self.request.session_mode, self.headers())

    def _message(self, content: list[dict[str, Any]], usage: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.started.model,
            "content": content,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
            EXTENSION: started_extension(self.request.session_mode, self.started),
        }
        if self.request.editing is not None:
            message["context_management"] = applied_edits(
                self.request.editing, self.started.context, self.request.thinking
            )
        return message

    def whole(self, done: cpb.TurnCompleted) -> dict[str, Any]:
        """The Message of a turn that ended with ``done``."""
        content: list[dict[str, Any]] = []
        if done.final_text or not done.pending_tool_calls:
            content.append({"type": "text", "text": done.final_text})
        content.extend(_tool_use(call) for call in done.pending_tool_calls)
        message = self._message(content, usage(done.turn_usage))
        message["stop_reason"] = _STOP.get(done.status, "end_turn")
        message[EXTENSION].update(ended_extension(done))
        return message

    def opening(self) -> list[tuple[str, dict[str, Any]]]:
        """``message_start`` (the input tokens as estimated before the call) and a ping."""
        estimate = {"input_tokens": self.started.prompt_tokens_estimate, "output_tokens": 0}
        return [
            ("message_start", {"type": "message_start", "message": self._message([], estimate)}),
            ("ping", {"type": "ping"}),
        ]

    def ending(self, done: cpb.TurnCompleted, blocks: int) -> list[tuple[str, dict[str, Any]]]:
        """After ``blocks`` content blocks (the text, when any was streamed, still
        open): its stop, each host tool call as a whole block, the stop reason with the
        usage, and the end."""
        events: list[tuple[str, dict[str, Any]]] = []
        if blocks:
            events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        for index, call in enumerate(done.pending_tool_calls, start=blocks):
            block = _tool_use(call)
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {**block, "input": {}},
                    },
                )
            )
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": json_text(block["input"]),
                        },
                    },
                )
            )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        delta: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": _STOP.get(done.status, "end_turn"), "stop_sequence": None},
            "usage": usage(done.turn_usage),
            EXTENSION: ended_extension(done),
        }
        if self.request.editing is not None:
            delta["context_management"] = applied_edits(
                self.request.editing, self.started.context, self.request.thinking
            )
        events.append(("message_delta", delta))
        events.append(("message_stop", {"type": "message_stop"}))
        return events


def text_start() -> tuple[str, dict[str, Any]]:
    block = {"type": "text", "text": ""}
    return "content_block_start", {
        "type": "content_block_start",
        "index": 0,
        "content_block": block,
    }


def text_delta(text: str) -> tuple[str, dict[str, Any]]:
    delta = {"type": "text_delta", "text": text}
    return "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}


def usage(u: cpb.TokenUsage) -> dict[str, Any]:
    """Anthropic's usage: ``input_tokens`` without the prompt cache's reads and writes,
    which have their own fields."""
    return {
        "input_tokens": max(0, u.prompt_tokens - u.cache_read_tokens - u.cache_write_tokens),
        "output_tokens": u.completion_tokens,
        "cache_read_input_tokens": u.cache_read_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
    }


def _tool_use(call: Any) -> dict[str, Any]:
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        # A model's arguments that are not a JSON object, passed on as the one field.
        arguments = {"input": call.arguments}
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}

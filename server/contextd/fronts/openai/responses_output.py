"""A native turn's events into the Responses API's objects: the ``response`` (whole, or
as it is retrieved), and the semantic events of a stream (``response.created``,
``response.output_text.delta``, ``response.function_call_arguments.delta``, ...,
``response.completed``), each with its ``sequence_number``."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextd.fronts.chat_http.failure import HttpFailure
from contextd.fronts.chat_http.turn import EXTENSION
from contextd.fronts.openai.response import Completion
from contextd.fronts.openai.response_ids import ResponseId, unstored_id
from contextd.fronts.openai.responses_request import ResponsesRequest, noted_request
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2

# The server's own tools: their calls are not the host's to see.
SERVER_TOOLS = frozenset({"memory_search", "recall_tool_result"})
# How a stored answer cut short is told.
_CUT_SHORT = {"error": "failed", "cancelled": "cancelled"}
# How a turn that ended without an answer is told (the API knows no step limit: the
# closest of its reasons).
_STATUS = {
    cpb.TURN_STATUS_OK: "completed",
    cpb.TURN_STATUS_REQUIRES_ACTION: "completed",
    cpb.TURN_STATUS_MAX_STEPS: "incomplete",
}


def output_text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [output_text_part(text)] if status == "completed" else []
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def call_item(call: pb.ToolCall, arguments: str | None = None) -> dict[str, Any]:
    done = arguments is None
    return {
        "id": "fc_" + call.id,
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": (call.arguments or "{}") if done else arguments,
        "status": "completed" if done else "in_progress",
    }


def usage(u: cpb.TokenUsage) -> dict[str, Any]:
    return {
        "input_tokens": u.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
        },
        "output_tokens": u.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    }


def response_object(
    response_id: str,
    model: str,
    created_at: int,
    status: str,
    output: Sequence[dict[str, Any]],
    body: Mapping[str, Any],
    turn_usage: dict[str, Any] | None,
) -> dict[str, Any]:
    """A ``response`` to a request of ``body``: the request's, or the parameters kept
    with a stored response (``request_note``; none: their defaults are shown)."""
    text = body.get("text") or {}
    out: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": body.get("max_tool_calls"),
        "model": model,
        "output": list(output),
        "parallel_tool_calls": body.get("parallel_tool_calls", True) is not False,
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": body.get("store") is not False,
        "temperature": body.get("temperature", 1.0),
        "text": {"format": text.get("format") or {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": [{"strict": None, **t} for t in body.get("tools") or ()],
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation") or "disabled",
        "usage": turn_usage,
        "user": body.get("user"),
        "metadata": body.get("metadata") or {},
    }
    conversation = body.get("conversation")
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    if conversation:
        out["conversation"] = {"id": conversation}
    return out


def stored_response(response_id: str, answer: sessions_pb2.SessionMessage) -> dict[str, Any]:
    """A stored response, retrieved: the answer that ended it, with what was kept with
    it (the model, the usage, the request's parameters: ``request_note``); one stored
    before they were kept shows their defaults."""
    message = answer.message
    host_calls = [c for c in message.tool_calls if c.name not in SERVER_TOOLS]
    output: list[dict[str, Any]] = []
    if message.content or not host_calls:
        output.append(message_item("msg_" + message.id, message.content))
    output.extend(call_item(c) for c in host_calls)
    if answer.status:
        status = _CUT_SHORT.get(answer.status, "incomplete")
    elif message.tool_calls and not host_calls:
        status = "incomplete"  # it stopped at the step limit, calling the server's tools
    else:
        status = "completed"
    record = answer.answer if answer.HasField("answer") else None
    asked = noted_request(record.note) if record is not None else {}
    return response_object(
        response_id,
        record.model if record is not None else "",
        asked.get("created_at", answer.create_time.seconds),
        status,
        output,
        asked,
        usage(record.usage) if record is not None else None,
    )


@dataclass
class ResponseBuilder:
    """One response being put together from the turn's events."""

    request: ResponsesRequest
    started: cpb.TurnStarted
    id: str = ""
    created_at: int = 0
    message_id: str = field(default_factory=lambda: "msg_" + secrets.token_hex(12))
    sequence: int = 0
    text: str = ""
    text_started: bool = False

    def __post_init__(self) -> None:
        self.created_at = self.request.created_at
        native = self.request.native
        after = native.tool_results[0].tool_call_id if native.tool_results else ""
        user = native.session.user_id
        if native.ephemeral:
            self.id = unstored_id()
        else:
            turn = self.started.turn_index
            self.id = ResponseId(user, self.started.session_id, turn, after).text()
        self.completion = Completion(self.request.session_mode, self.started)

    def headers(self) -> dict[str, str]:
        return self.completion.headers()

    def failure(self, done: cpb.TurnCompleted) -> HttpFailure | None:
        return self.completion.failure(done)

    def output(self, done: cpb.TurnCompleted) -> list[dict[str, Any]]:
        items = []
        if done.final_text or not done.pending_tool_calls:
            items.append(message_item(self.message_id, done.final_text))
        items.extend(call_item(call) for call in done.pending_tool_calls)
        return items

    def response(
        self,
        status: str,
        output: Sequence[dict[str, Any]],
        done: cpb.TurnCompleted | None = None,
    ) -> dict[str, Any]:
        out = response_object(
            self.id,
            self.started.model,
            self.created_at,
            status,
            output,
            self.request.body,
            usage(done.turn_usage) if done is not None else None,
        )
        out[EXTENSION] = self.completion.started_extension()
        return out

    def whole(self, done: cpb.TurnCompleted) -> dict[str, Any]:
        return self.response(_STATUS.get(done.status, "completed"), self.output(done), done)

    # -- the stream's events ------------------------------------------------------
    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        out = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return out

    def opening(self) -> list[dict[str, Any]]:
        created = self.response("in_progress", [])
        return [
            self.event("response.created", response=created),
            self.event("response.in_progress", response=created),
        ]

    def delta(self, text: str) -> list[dict[str, Any]]:
        events = []
        if not self.text_started:
            self.text_started = True
            events.append(
                self.event(
                    "response.output_item.added",
                    output_index=0,
                    item=message_item(self.message_id, "", "in_progress"),
                )
            )
            part = output_text_part("")
            events.append(self.event("response.content_part.added", **self._text_at, part=part))
        self.text += text
        events.append(
            self.event("response.output_text.delta", **self._text_at, delta=text, logprobs=[])
        )
        return events

    @property
    def _text_at(self) -> dict[str, Any]:
        """Where the answer's text stands: the message item's one content part."""
        return {"item_id": self.message_id, "output_index": 0, "content_index": 0}

    def closing(self, done: cpb.TurnCompleted) -> list[dict[str, Any]]:
        """The items' ends, the calls, and ``response.completed`` (or ``incomplete``)."""
        events = []
        text = done.final_text or self.text
        output: list[dict[str, Any]] = []
        if self.text_started or not done.pending_tool_calls:
            if not self.text_started:
                events += self.delta("") if text == "" else self.delta(text)
            where = self._text_at
            events.append(self.event("response.output_text.done", **where, text=text, logprobs=[]))
            events.append(
                self.event("response.content_part.done", **where, part=output_text_part(text))
            )
            item = message_item(self.message_id, text)
            events.append(self.event("response.output_item.done", output_index=0, item=item))
            output.append(item)
        for call in done.pending_tool_calls:
            index = len(output)
            item_id = "fc_" + call.id
            events.append(
                self.event(
                    "response.output_item.added", output_index=index, item=call_item(call, "")
                )
            )
            arguments = call.arguments or "{}"
            events.append(
                self.event(
                    "response.function_call_arguments.delta",
                    item_id=item_id,
                    output_index=index,
                    delta=arguments,
                )
            )
            events.append(
                self.event(
                    "response.function_call_arguments.done",
                    item_id=item_id,
                    output_index=index,
                    name=call.name,
                    arguments=arguments,
                )
            )
            item = call_item(call)
            events.append(self.event("response.output_item.done", output_index=index, item=item))
            output.append(item)
        status = _STATUS.get(done.status, "completed")
        kind = "response.completed" if status == "completed" else "response.incomplete"
        events.append(self.event(kind, response=self.response(status, output, done)))
        return events

    def failed(self, message: str, code: str) -> dict[str, Any]:
        failed = self.response("failed", [])
        failed["error"] = {"code": code, "message": message}
        return self.event("response.failed", response=failed)

"""Spans of model calls and tool runs, with the attributes of the OpenTelemetry GenAI
semantic conventions: ``chat {model}`` (kind CLIENT) and ``execute_tool {tool}``.

Both ``gen_ai.provider.name`` (the conventions' current name) and ``gen_ai.system``
(the name before it, which the metrics' labels and older backends use) are set. The
messages of a call (``gen_ai.input.messages``, ``gen_ai.output.messages``, in the
conventions' JSON form of role and parts) are recorded only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is true: they are the users'
words, and by default a trace carries none of them.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.parse
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from opentelemetry.trace import Span, SpanKind
from opentelemetry.util.types import AttributeValue

from contextd.core import json_text
from contextd.core.messages import ChatMessage, ToolCall
from contextd.tracing import spans

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def captures_content() -> bool:
    """Whether model calls record their messages (read per call: a test may change it)."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"


@dataclass(frozen=True, slots=True)
class ModelServer:
    """Where a provider's calls go: ``server.address`` and ``server.port`` (none for a
    provider in the process, echo)."""

    address: str = ""
    port: int = 0

    @classmethod
    def of(cls, base_url: str) -> ModelServer:
        if not base_url:
            return cls()
        url = urllib.parse.urlsplit(base_url)
        default = 443 if url.scheme == "https" else 80
        return cls(url.hostname or "", url.port or default)


def model_call(
    provider: str,
    model: str,
    server: ModelServer,
    *,
    max_tokens: int | None,
    temperature: float | None,
    messages: Sequence[ChatMessage],
) -> AbstractContextManager[Span | None]:
    """The span of one model call, current while it streams; ``model_call_ended`` sets
    what the answer said. Without tracing, a context manager doing nothing."""
    tracer = spans.tracer()
    if tracer is None:
        return spans.span("")  # tracing off: the shared no-op
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,
        "gen_ai.request.model": model,
    }
    if max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = max_tokens
    if temperature is not None:
        attributes["gen_ai.request.temperature"] = temperature
    if server.address:
        attributes["server.address"] = server.address
        attributes["server.port"] = server.port
    if captures_content():
        attributes["gen_ai.input.messages"] = json.dumps(
            [_message(m) for m in messages], ensure_ascii=False
        )
    return tracer.start_as_current_span(
        f"chat {model}",
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    )


def error_type(failure: BaseException | None) -> str:
    """A model call's outcome as its ``error.type`` (and the metrics' ``error_type``
    label): "" when it succeeded, "cancelled" when it was called off."""
    if failure is None:
        return ""
    if isinstance(failure, asyncio.CancelledError | GeneratorExit):
        return "cancelled"
    return type(failure).__name__


def model_call_ended(
    span: Span,
    *,
    finish_reason: str,
    response_id: str,
    response_model: str,
    input_tokens: int,
    output_tokens: int,
    text: str,
    calls: Sequence[ToolCall],
    error_type: str,
) -> None:
    """What the call's answer said (``error_type`` "" when it succeeded)."""
    if finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", (finish_reason,))
    if response_id:
        span.set_attribute("gen_ai.response.id", response_id)
    if response_model:
        span.set_attribute("gen_ai.response.model", response_model)
    span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
    if error_type:
        spans.fail(span, error_type)
    elif captures_content():
        output = _output(text, calls, finish_reason)
        span.set_attribute("gen_ai.output.messages", json.dumps([output], ensure_ascii=False))


def tool_call(
    name: str, call_id: str, tool_type: str = "function"
) -> AbstractContextManager[Span | None]:
    """The span of one tool run within the turn."""
    return spans.span(
        f"execute_tool {name}",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": tool_type,
        },
    )


def _message(message: ChatMessage) -> dict[str, object]:
    parts: list[dict[str, object]] = []
    if message.tool_call_id:
        parts.append(
            {"type": "tool_call_response", "id": message.tool_call_id, "response": message.content}
        )
    elif message.content:
        parts.append({"type": "text", "content": message.content})
    parts += [_call_part(call) for call in message.tool_calls]
    return {"role": str(message.role), "parts": parts}


def _output(text: str, calls: Sequence[ToolCall], finish_reason: str) -> dict[str, object]:
    parts: list[dict[str, object]] = [{"type": "text", "content": text}] if text else []
    parts += [_call_part(call) for call in calls]
    return {"role": "assistant", "parts": parts, "finish_reason": finish_reason or "stop"}


def _call_part(call: ToolCall) -> dict[str, object]:
    try:
        arguments: object = json_text.loads(call.arguments or "{}")
    except ValueError:
        arguments = call.arguments
    return {"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments}

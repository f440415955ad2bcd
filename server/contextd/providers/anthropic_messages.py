"""Anthropic's Messages API, streamed through the official ``anthropic`` SDK.

The request is ``POST {base_url}/v1/messages`` with ``stream: true``: the
system text apart (``system``) and the turns from
:func:`contextd.core.formats.to_anthropic` (with ``cache_control`` breakpoints when
the request has a cached prefix), ``stop_sequences``, ``tools`` as
``{name, description, input_schema}`` with ``tool_choice`` (auto, none, ``any`` for
required, ``tool`` for a named function; ``disable_parallel_tool_use`` when parallel
calls are off). Structured output with a schema is Anthropic's own,
``output_config.format`` (``{"type": "json_schema", "schema": ...}``, no beta header),
for the models that have it (``native_format``): the answer's text is the JSON. For
the rest (Claude 3 and earlier, Sonnet 4 and Opus 4, and names that are not Claude's:
an Anthropic-compatible server may not know the field) and for a JSON object without a
schema, it takes the forced-tool form: one more tool whose ``input_schema`` is the
schema (``{"type": "object"}`` for a JSON object), chosen with ``tool`` (or ``any``
beside host tools); its input streams as the answer's text and its ``tool_use`` stop
is a ``stop``. ``max_tokens`` is required by the API:
a request without ``max_output_tokens`` gets the provider's
``default_max_tokens`` (1024 unless configured). ``temperature`` is sent as a
plain body field (the current SDK no longer lists it; models that refuse it
answer 400 -> ``ProviderBadResponse``).

Events: ``TextDelta`` per ``text_delta``; a ``tool_use`` block becomes one
``ToolCallReady`` at its ``content_block_stop``, its arguments the
concatenated ``input_json_delta.partial_json`` text (or the block's initial
``input`` as JSON when no delta came); thinking and other block kinds are
skipped. ``Usage``: prompt = ``input_tokens`` plus the cache creation and cache
read tokens (Anthropic counts those apart; a prompt's every token is in
``prompt_tokens``, as with OpenAI), cache reads = ``cache_read_input_tokens``,
cache writes = ``cache_creation_input_tokens``, completion = ``output_tokens``;
from ``message_start``, each figure updated by a ``message_delta`` that has it. Last ``Finished``:
``end_turn`` / ``stop_sequence`` -> stop, ``tool_use`` -> tool_calls,
``max_tokens`` / ``model_context_window_exceeded`` -> length, ``refusal`` ->
content_filter, anything else -> other. A stream that ends before
``message_stop`` is a ``ProviderBadResponse``; ``event: error`` and the rest of
the errors: see :mod:`contextd.providers._sdk`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Unpack, cast

import anthropic

from contextd.core.formats import to_anthropic
from contextd.core.messages import ToolCall
from contextd.providers._sdk import (
    Redactor,
    SdkErrors,
    as_int,
    as_json_object,
    as_text,
    stream_error,
)
from contextd.providers.base import (
    Capabilities,
    Finished,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallReady,
    Usage,
)
from contextd.providers.errors import ProviderBadResponse
from contextd.providers.sdk_provider import SdkOptions, SdkProvider

DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"
DEFAULT_MAX_TOKENS = 1024

ANTHROPIC_ERRORS = SdkErrors.of(anthropic)

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


def normalize_stop_reason(raw: str) -> str:
    return _STOP_REASONS.get(raw, "other")


@dataclass(slots=True)
class _ToolBlock:
    id: str
    name: str
    initial_input: object
    arguments: str = ""
    had_delta: bool = False

    def call(self) -> ToolCall:
        if self.had_delta:
            arguments = self.arguments
        elif self.initial_input is None:
            arguments = ""
        else:
            arguments = json.dumps(self.initial_input, ensure_ascii=False)
        return ToolCall(self.id, self.name, arguments)


class EventAssembler:
    """Turns Messages API stream events (as dicts) into ModelEvents."""

    def __init__(self, provider: str, redactor: Redactor, answer_tool: str | None = None) -> None:
        self._provider = provider
        self._redactor = redactor
        self._tools: dict[int, _ToolBlock] = {}
        # The forced tool whose input is a structured answer: streamed as text.
        self._answer_tool = answer_tool
        self._answer_blocks: dict[int, bool] = {}  # index: whether a delta came
        self._answered = False
        self._initial_answers: dict[int, object] = {}
        self._host_calls = False
        self._input_tokens: int | None = None
        self._cache_read_tokens = 0
        self._cache_write_tokens = 0
        self._completion_tokens = 0
        self._stop_reason = ""
        self._stopped = False
        self._response: tuple[str, str] = ("", "")  # id and model, from message_start

    def feed(self, item: object) -> list[ModelEvent]:
        event = as_json_object(item)
        if event is None:
            raise ProviderBadResponse(self._provider, "a stream event is not a JSON object")
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            if not isinstance(message, Mapping):
                raise TypeError("message_start without a message")
            self._take_usage(message.get("usage"))
            self._response = (as_text(message.get("id")), as_text(message.get("model")))
        elif kind == "content_block_start":
            return self._block_start(event)
        elif kind == "content_block_delta":
            return self._block_delta(event)
        elif kind == "content_block_stop":
            index = _index(event)
            if index in self._answer_blocks:
                return self._answer_ended(index)
            block = self._tools.pop(index, None)
            if block is not None:
                return [ToolCallReady(block.call())]
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, Mapping) and delta.get("stop_reason") is not None:
                self._stop_reason = as_text(delta.get("stop_reason"))
            self._take_usage(event.get("usage"))
        elif kind == "message_stop":
            self._stopped = True
        elif kind == "error":
            raise stream_error(self._provider, event, self._redactor)
        # "ping" and event types added later are skipped, as the API asks.
        return []

    def end(self) -> list[ModelEvent]:
        if not self._stopped:
            raise ProviderBadResponse(self._provider, "the stream ended before message_stop")
        events: list[ModelEvent] = [ToolCallReady(b.call()) for _, b in sorted(self._tools.items())]
        self._tools.clear()
        if self._input_tokens is not None:
            read, write = self._cache_read_tokens, self._cache_write_tokens
            prompt = self._input_tokens + read + write
            events.append(Usage(prompt, self._completion_tokens, read, write))
        reason = normalize_stop_reason(self._stop_reason)
        if reason == "tool_calls" and self._answered and not self._host_calls:
            reason = "stop"  # the tool it used was the answer's
        events.append(Finished(reason, *self._response))
        return events

    def _answer_ended(self, index: int) -> list[ModelEvent]:
        """The answer tool's block ended: its input was streamed as text, or, when no delta
        came, is its initial input."""
        streamed = self._answer_blocks.pop(index)
        initial = self._initial_answers.pop(index, None)
        if streamed:
            return []
        return [TextDelta(json.dumps(initial if initial is not None else {}, ensure_ascii=False))]

    def _take_usage(self, usage: object) -> None:
        if not isinstance(usage, Mapping):
            return
        # message_delta's usage is cumulative, and a figure it leaves out stands.
        if usage.get("input_tokens") is not None:
            self._input_tokens = as_int(usage.get("input_tokens"))
        if usage.get("cache_read_input_tokens") is not None:
            self._cache_read_tokens = as_int(usage.get("cache_read_input_tokens"))
        if usage.get("cache_creation_input_tokens") is not None:
            self._cache_write_tokens = as_int(usage.get("cache_creation_input_tokens"))
        if usage.get("output_tokens") is not None:
            self._completion_tokens = as_int(usage.get("output_tokens"))

    def _block_start(self, event: Mapping[str, Any]) -> list[ModelEvent]:
        block = event.get("content_block")
        if not isinstance(block, Mapping):
            raise TypeError("content_block_start without a content_block")
        if block.get("type") == "tool_use":
            name = as_text(block.get("name"))
            if not name:
                raise ProviderBadResponse(self._provider, "tool_use block without a name")
            index = _index(event)
            if name == self._answer_tool:
                self._answer_blocks[index] = False
                self._answered = True
                initial = block.get("input")
                self._initial_answers[index] = initial if initial else None
                return []
            self._host_calls = True
            self._tools[index] = _ToolBlock(
                id=as_text(block.get("id")) or f"toolu_{index}",
                name=name,
                initial_input=block.get("input"),
            )
        elif block.get("type") == "text" and (text := as_text(block.get("text"))):
            return [TextDelta(text)]
        return []

    def _block_delta(self, event: Mapping[str, Any]) -> list[ModelEvent]:
        delta = event.get("delta")
        if not isinstance(delta, Mapping):
            raise TypeError("content_block_delta without a delta")
        kind = delta.get("type")
        if kind == "text_delta":
            text = as_text(delta.get("text"))
            return [TextDelta(text)] if text else []
        if kind == "input_json_delta":
            index = _index(event)
            if index in self._answer_blocks:
                text = as_text(delta.get("partial_json"))
                self._answer_blocks[index] = self._answer_blocks[index] or bool(text)
                return [TextDelta(text)] if text else []
            block = self._tools.get(index)
            if block is None:
                raise ProviderBadResponse(
                    self._provider, f"input_json_delta for block {index}, not a tool_use block"
                )
            block.arguments += as_text(delta.get("partial_json"))
            block.had_delta = True
        return []


# Claude models from before structured outputs, by their names' beginnings: Claude 3
# and earlier, Sonnet 4 and Opus 4 (their aliases and dated ids). Opus 4.1, the 4.5
# models and later have them.
_BEFORE_NATIVE_FORMAT = (
    "claude-2",
    "claude-instant",
    "claude-3",
    "claude-sonnet-4-0",
    "claude-sonnet-4-2025",
    "claude-opus-4-0",
    "claude-opus-4-2025",
)


def native_format(request: ModelRequest, model: str) -> bool:
    """Whether the request's structured output goes as Anthropic's own
    ``output_config.format``: a JSON schema, for a Claude model that has it."""
    return (
        request.response_format.type == "json_schema"
        and model.startswith("claude-")
        and not model.startswith(_BEFORE_NATIVE_FORMAT)
    )


def answer_tool(request: ModelRequest, model: str) -> str | None:
    """The tool that carries a structured answer, when the request asks for one that
    ``model`` cannot take natively and the host does not force its own tools; named
    after the format (unless a host tool has that name)."""
    fmt = request.response_format
    if not fmt.is_json or request.tool_choice.forces_call or native_format(request, model):
        return None
    name = fmt.name if fmt.type == "json_schema" else "answer"
    if any(tool.name == name for tool in request.tools):
        name = f"{name[:57]}_answer"
    return name


def _tool_choice(request: ModelRequest) -> dict[str, Any] | None:
    """Anthropic's tool_choice for the request's; None for its default (auto, parallel)."""
    choice = request.tool_choice
    if choice.mode == "none":
        return {"type": "none"}
    out: dict[str, Any]
    if choice.mode == "required":
        out = {"type": "any"}
    elif choice.mode == "function":
        out = {"type": "tool", "name": choice.name}
    elif request.parallel_tool_calls is False:
        out = {"type": "auto"}
    else:
        return None
    if request.parallel_tool_calls is False:
        out["disable_parallel_tool_use"] = True
    return out


def _index(event: Mapping[str, Any]) -> int:
    index = event.get("index")
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError("content block index is not an integer")
    return index


class AnthropicProvider(SdkProvider):
    """Streams a Messages API call (see SdkProvider for ``timeout`` and the retries; 529
    is retried as a 5xx). Its own: ``default_max_tokens``, the output limit a request
    without one gets (the API requires one)."""

    name = "anthropic"
    sdk = ANTHROPIC_ERRORS
    capabilities = Capabilities(follows_instructions=True, carries_blank_user_turns=False)

    def __init__(
        self,
        *,
        model: str = DEFAULT_ANTHROPIC_MODEL,
        base_url: str = DEFAULT_ANTHROPIC_BASE_URL,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        **options: Unpack[SdkOptions],
    ) -> None:
        if default_max_tokens < 1:
            raise ValueError("default_max_tokens must be at least 1")
        base_url = base_url or DEFAULT_ANTHROPIC_BASE_URL
        super().__init__(model=model or DEFAULT_ANTHROPIC_MODEL, base_url=base_url, **options)
        self.default_max_tokens = default_max_tokens
        self._client = anthropic.AsyncAnthropic(**self.client_options)

    @property
    def client(self) -> anthropic.AsyncAnthropic:
        return self._client

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (``stream`` included)."""
        payload = to_anthropic(request.messages, request.cached_prefix)
        model = request.model or self.default_model
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": request.max_output_tokens or self.default_max_tokens,
            "messages": payload["messages"],
            "stream": True,
        }
        if "system" in payload:
            body["system"] = payload["system"]
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        tools = [
            {
                "name": tool.name,
                **({"description": tool.description} if tool.description else {}),
                "input_schema": tool.parameters,
            }
            for tool in request.tools
        ]
        choice = _tool_choice(request)
        answer = answer_tool(request, model)
        if native_format(request, model):
            schema = request.response_format.schema
            body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        elif answer is not None:
            # Structured output in its forced-tool form: the tool's input is the answer.
            fmt = request.response_format
            schema = fmt.schema if fmt.type == "json_schema" else {"type": "object"}
            description = fmt.description or "Give the answer, as this tool's input."
            tools.append({"name": answer, "description": description, "input_schema": schema})
            # With host tools: one of them or the answer; without: the answer.
            choice = {"type": "any"} if request.tools else {"type": "tool", "name": answer}
            if request.parallel_tool_calls is False:
                choice["disable_parallel_tool_use"] = True
        if tools:
            body["tools"] = tools
            if choice is not None:
                body["tool_choice"] = choice
        return body

    def open_stream(self, body: dict[str, Any]) -> Awaitable[Any]:
        # The fields the SDK requires go by name, the optional ones as extra_body: plain
        # JSON, whatever the SDK version lists.
        known = {k: body[k] for k in ("model", "max_tokens", "messages")}
        extra = {k: v for k, v in body.items() if k not in known and k != "stream"}
        create = cast(Callable[..., Awaitable[Any]], self._client.messages.create)
        return create(**known, stream=True, extra_body=extra)

    def assembler(self, request: ModelRequest) -> EventAssembler:
        model = request.model or self.default_model
        return EventAssembler(self.name, self._redactor, answer_tool(request, model))

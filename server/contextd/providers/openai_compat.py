"""Any OpenAI-compatible Chat Completions endpoint, through the official ``openai`` SDK.

One class serves OpenAI itself and the servers that copy its API, chosen by
``base_url``:

* OpenAI: the default ``https://api.openai.com/v1``.
* Azure OpenAI: ``https://<resource>.openai.azure.com/openai/v1/`` (the v1 API
  takes the key as a Bearer token); the older deployment URLs
  (``.../openai/deployments/<name>``) also need
  ``default_query={"api-version": "..."}`` and ``default_headers={"api-key": key}``.
* Ollama ``http://localhost:11434/v1``, vLLM / llama.cpp server
  ``http://localhost:8000/v1``, DeepSeek ``https://api.deepseek.com/v1``.
  Local servers that need no key get the placeholder key ``no-key``.

The request is ``POST {base_url}/chat/completions`` with ``stream: true`` and,
unless ``include_usage=False`` (for servers that reject it),
``stream_options: {"include_usage": true}``. The output limit goes out as
``max_tokens`` (what every compatible server understands); OpenAI's reasoning
models only take ``max_completion_tokens``: pass
``max_tokens_param="max_completion_tokens"`` for them. ``tool_choice`` (when not
auto), ``parallel_tool_calls`` (when set) and ``response_format`` (``json_object``,
``json_schema`` with its name, schema and ``strict``) go as OpenAI names them.

Events: ``TextDelta`` per non-empty ``delta.content``; tool-call deltas are
assembled per ``index`` (``id`` and ``name`` from the first delta that has
them, ``arguments`` concatenated) and emitted whole as ``ToolCallReady`` when
the choice's ``finish_reason`` arrives (or when the stream ends); then
``Usage`` when the server reported it (the usage chunk with empty
``choices``; the last one wins; ``prompt_tokens_details.cached_tokens`` as its
cache reads, already counted in ``prompt_tokens``), and last ``Finished``.
Many local servers send no usage, or zeros: the chat turn then counts for
itself (app/chat/turn.py). The arguments are passed
through as the model wrote them, valid JSON or not. Finish reasons: ``stop`` ->
stop, ``length`` -> length, ``tool_calls`` / ``function_call`` -> tool_calls,
``content_filter`` -> content_filter, anything else -> other; a ``stop`` that
ended a turn with tool calls (some servers say so) counts as tool_calls. Only
choice 0 is read. Errors: see :mod:`contextd.providers._sdk`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Unpack

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from contextd.core.formats import to_openai
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
    LANGUAGE_MODEL,
    Finished,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallReady,
    Usage,
)
from contextd.providers.errors import ProviderBadResponse
from contextd.providers.sdk_provider import SdkOptions, SdkProvider

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"

# The openai SDK's error classes (its embeddings client raises them too).
OPENAI_ERRORS = SdkErrors.of(openai)

_FINISH_REASONS = {
    "stop": "stop",
    "eos": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
}


def normalize_finish_reason(raw: str, *, had_tool_calls: bool = False) -> str:
    reason = _FINISH_REASONS.get(raw, "other")
    if reason == "stop" and had_tool_calls:
        return "tool_calls"
    return reason


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""
    emitted: bool = False


class ChunkAssembler:
    """Turns ``chat.completion.chunk`` objects (as dicts) into ModelEvents."""

    def __init__(self, provider: str, redactor: Redactor) -> None:
        self._provider = provider
        self._redactor = redactor
        self._calls: dict[int, _PartialCall] = {}
        self._last_key: int | None = None
        self._usage: Usage | None = None
        self._finish_raw: str | None = None
        self._had_tool_calls = False
        self._response: tuple[str, str] = ("", "")  # id and model, from the finishing chunk

    def feed(self, item: object) -> list[ModelEvent]:
        chunk = as_json_object(item)
        if chunk is None:
            raise ProviderBadResponse(self._provider, "a stream item is not a JSON object")
        if chunk.get("error"):
            raise stream_error(self._provider, chunk, self._redactor)
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
            self._usage = Usage(
                prompt_tokens=as_int(usage.get("prompt_tokens")),
                completion_tokens=as_int(usage.get("completion_tokens")),
                cache_read_tokens=as_int(cached),
            )
        choices = chunk.get("choices") or []  # vLLM sends null on the usage chunk
        if not isinstance(choices, list):
            raise TypeError("choices is not a list")
        events: list[ModelEvent] = []
        for choice in choices:
            if not isinstance(choice, Mapping):
                raise TypeError("a choice is not an object")
            if choice.get("index") not in (0, None):
                continue
            delta = choice.get("delta") or {}
            if not isinstance(delta, Mapping):
                raise TypeError("delta is not an object")
            text = as_text(delta.get("content"))
            if text:
                events.append(TextDelta(text))
            tool_calls = delta.get("tool_calls") or []
            if not isinstance(tool_calls, list):
                raise TypeError("tool_calls is not a list")
            for tool_delta in tool_calls:
                self._add_tool_delta(tool_delta)
            finish = choice.get("finish_reason")
            if finish is not None:
                self._finish_raw = as_text(finish)
                self._response = (as_text(chunk.get("id")), as_text(chunk.get("model")))
                events.extend(self._ready_calls())
        return events

    def end(self) -> list[ModelEvent]:
        """The closing events once the stream is over."""
        if self._finish_raw is None:
            raise ProviderBadResponse(self._provider, "the stream ended before a finish_reason")
        events = self._ready_calls()
        if self._usage is not None:
            events.append(self._usage)
        reason = normalize_finish_reason(self._finish_raw, had_tool_calls=self._had_tool_calls)
        events.append(Finished(reason, *self._response))
        return events

    def _add_tool_delta(self, raw: object) -> None:
        if not isinstance(raw, Mapping):
            raise TypeError("a tool call delta is not an object")
        call_id = as_text(raw.get("id"))
        index = raw.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            key = index
        elif index is not None:
            raise TypeError("tool call index is not an integer")
        elif self._last_key is None or (call_id and call_id != self._calls[self._last_key].id):
            # No index (some servers): a new id starts a new call.
            key = max(self._calls, default=-1) + 1
        else:
            key = self._last_key
        self._last_key = key
        call = self._calls.setdefault(key, _PartialCall())
        if call_id and not call.id:
            call.id = call_id
        function = raw.get("function") or {}
        if not isinstance(function, Mapping):
            raise TypeError("tool call function is not an object")
        name = as_text(function.get("name"))
        if name and name != call.name:
            call.name += name
        call.arguments += as_text(function.get("arguments"))

    def _ready_calls(self) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        for key in sorted(self._calls):
            call = self._calls[key]
            if call.emitted:
                continue
            if not call.name:
                raise ProviderBadResponse(self._provider, f"tool call {key} has no function name")
            call.emitted = True
            self._had_tool_calls = True
            events.append(
                ToolCallReady(ToolCall(call.id or f"call_{key}", call.name, call.arguments))
            )
        return events


class OpenAIProvider(SdkProvider):
    """Streams Chat Completions from an OpenAI-compatible endpoint (see SdkProvider for
    ``timeout`` and the retries). Its own: ``default_query`` (Azure's older URLs),
    ``include_usage`` (off for servers that reject ``stream_options``) and
    ``max_tokens_param`` (what the output limit is sent as)."""

    name = "openai"
    sdk = OPENAI_ERRORS
    capabilities = LANGUAGE_MODEL

    def __init__(
        self,
        *,
        model: str = DEFAULT_OPENAI_MODEL,
        base_url: str = DEFAULT_OPENAI_BASE_URL,
        default_query: Mapping[str, str] | None = None,
        include_usage: bool = True,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        **options: Unpack[SdkOptions],
    ) -> None:
        base_url = base_url or DEFAULT_OPENAI_BASE_URL
        super().__init__(model=model or DEFAULT_OPENAI_MODEL, base_url=base_url, **options)
        self.include_usage = include_usage
        self.max_tokens_param = max_tokens_param
        query = dict(default_query) if default_query else None
        self._client = openai.AsyncOpenAI(**self.client_options, default_query=query)

    @property
    def client(self) -> openai.AsyncOpenAI:
        return self._client

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (``stream`` included)."""
        body: dict[str, Any] = {
            "model": request.model or self.default_model,
            "messages": to_openai(request.messages)["messages"],
            "stream": True,
        }
        if self.include_usage:
            body["stream_options"] = {"include_usage": True}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_output_tokens:
            body[self.max_tokens_param] = request.max_output_tokens
        if request.stop:
            body["stop"] = list(request.stop)
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        **({"description": tool.description} if tool.description else {}),
                        "parameters": tool.parameters,
                    },
                }
                for tool in request.tools
            ]
            choice = request.tool_choice
            if choice.mode == "function":
                body["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
            elif choice.mode != "auto":
                body["tool_choice"] = choice.mode
            if request.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = request.parallel_tool_calls
        fmt = request.response_format
        if fmt.type == "json_object":
            body["response_format"] = {"type": "json_object"}
        elif fmt.type == "json_schema":
            schema: dict[str, Any] = {"name": fmt.name, "schema": fmt.schema, "strict": fmt.strict}
            if fmt.description:
                schema["description"] = fmt.description
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        return body

    def open_stream(self, body: dict[str, Any]) -> Awaitable[Any]:
        # Posted as it is: the body is plain JSON already. The SDK's ``create`` would
        # first walk it against its parameter types, which changes nothing in a body
        # made here (tests/providers check that) and costs, before the request leaves,
        # time that grows with the messages: several milliseconds for a conversation
        # of fifty.
        return self._client.post(
            "/chat/completions",
            body=body,
            cast_to=ChatCompletion,
            stream=True,
            stream_cls=openai.AsyncStream[ChatCompletionChunk],
        )

    def assembler(self, request: ModelRequest) -> ChunkAssembler:
        return ChunkAssembler(self.name, self._redactor)

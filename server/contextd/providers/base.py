"""One async streaming interface in front of every LLM provider.

A provider turns a ModelRequest (the final neutral message list plus model
options and tool definitions) into a stream of ModelEvents. Stopping iteration
early (a client cancel) must close the provider's HTTP stream promptly: an
implementation releases its connection in ``finally`` / ``async with``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from contextd.core.messages import ChatMessage, ToolCall


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A function the model may call: name, description and JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """Which tools the model may or must call: ``mode`` is "auto", "none", "required"
    (at least one) or "function" (the tool named ``name``)."""

    mode: str = "auto"
    name: str = ""

    @property
    def forces_call(self) -> bool:
        return self.mode in ("required", "function")


AUTO = ToolChoice()


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    """The answer's shape: ``type`` "text", "json_object" (any JSON object) or
    "json_schema" (valid against ``schema``, named ``name``; ``strict``: enforced
    exactly where the provider can)."""

    type: str = "text"
    name: str = "answer"
    description: str = ""
    schema: dict[str, Any] = field(default_factory=dict)
    strict: bool = False

    @property
    def is_json(self) -> bool:
        return self.type != "text"


TEXT = ResponseFormat()


@dataclass(frozen=True, slots=True)
class ModelRequest:
    # System messages first, then the conversation; as BuildMessages returns it.
    messages: Sequence[ChatMessage]
    model: str = ""  # "" means the provider's configured default
    temperature: float | None = None
    max_output_tokens: int | None = None
    stop: Sequence[str] = ()
    tools: Sequence[ToolSpec] = ()
    tool_choice: ToolChoice = AUTO
    # False: one tool call per step at most; None: the provider's default.
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat = TEXT
    # Local estimate of the prompt, for providers that report no usage (echo).
    prompt_tokens_estimate: int = 0
    # With the stable-prefix cache layout: how many leading messages stay the same
    # next turn (core.formats.to_anthropic marks cache breakpoints there); None: off.
    cached_prefix: int | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallReady:
    """A whole tool call, assembled from the provider's deltas."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage as the provider reported it.

    ``prompt_tokens`` counts every input token, the cached ones included (OpenAI's
    ``prompt_tokens``; Anthropic's ``input_tokens`` plus its cache reads and writes).
    ``cache_read_tokens`` of them were read from the provider's prompt cache,
    ``cache_write_tokens`` written to it (Anthropic's cache creation; OpenAI reports none).
    ``estimated``: the figures are the provider's own local counts, not a model's.
    """

    prompt_tokens: int
    completion_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    estimated: bool = False


@dataclass(frozen=True, slots=True)
class Finished:
    # Normalized: "stop", "tool_calls", "length", "content_filter" or "other".
    reason: str
    # The answer's id and the model that wrote it, as the provider said ("" if it did
    # not): for traces, not part of how the stream ended (not compared).
    response_id: str = field(default="", compare=False)
    response_model: str = field(default="", compare=False)


ModelEvent = TextDelta | ToolCallReady | Usage | Finished


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a provider can be asked for besides a chat turn's answer."""

    # Its answers follow the instructions it is given, so the work after a turn may have
    # it extract memories and write summaries. A provider whose answers only reflect its
    # input (echo) says False, and that work uses its rules instead.
    follows_instructions: bool
    # Its API takes a user message without text (Chat Completions does; Anthropic's
    # Messages API refuses a text block without text): where it does not, a chat turn's
    # context leaves such a message out and its report says so.
    carries_blank_user_turns: bool = True


# A language model behind an API.
LANGUAGE_MODEL = Capabilities(follows_instructions=True)


class Provider(Protocol):
    """Streams one model call. Raises ProviderError subclasses (providers/errors.py)."""

    name: str
    default_model: str
    capabilities: Capabilities

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]: ...

    async def aclose(self) -> None: ...

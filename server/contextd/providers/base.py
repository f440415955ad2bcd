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
class ModelRequest:
    # System messages first, then the conversation; as BuildMessages returns it.
    messages: Sequence[ChatMessage]
    model: str = ""  # "" means the provider's configured default
    temperature: float | None = None
    max_output_tokens: int | None = None
    stop: Sequence[str] = ()
    tools: Sequence[ToolSpec] = ()
    # Local estimate of the prompt, for providers that report no usage (echo).
    prompt_tokens_estimate: int = 0


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallReady:
    """A whole tool call, assembled from the provider's deltas."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage as the provider reported it."""

    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True, slots=True)
class Finished:
    # Normalized: "stop", "tool_calls", "length", "content_filter" or "other".
    reason: str
    # The provider's own word for it, for logs and events.
    raw_reason: str = ""


ModelEvent = TextDelta | ToolCallReady | Usage | Finished


class Provider(Protocol):
    """Streams one model call. Raises ProviderError subclasses (providers/errors.py)."""

    name: str
    default_model: str

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]: ...

    async def aclose(self) -> None: ...

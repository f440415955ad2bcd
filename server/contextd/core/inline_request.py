"""BuildMessages with the history in the request, as a transport received it.

The history stays the transport's own message objects (the generated gRPC message
is one), roles still the API's numbers: converting every message costs more than
the rest of a plain call, so each way of building reads them as it needs to, the
plain shortcut directly (``core/plain_build.py``), the general build after
``chat_messages``. The other fields are in the domain's terms already, but for the
tokenizer: a name, which the app resolves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from contextd.core.build import CacheLayout, OverflowPolicy
from contextd.core.content import ContentPart, ImageLimits, parts_text
from contextd.core.errors import FieldViolation, Violations
from contextd.core.formats import OutputFormat
from contextd.core.messages import ChatMessage, CompressionSummary, Role, ToolCall
from contextd.core.prompt import PromptLayers


class ApiToolCall(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> str: ...


class ApiMessage(Protocol):
    """A history message as the API received it, its role still the API's number."""

    @property
    def id(self) -> str: ...
    @property
    def role(self) -> int: ...
    @property
    def content(self) -> str: ...
    @property
    def tool_calls(self) -> Sequence[ApiToolCall]: ...
    @property
    def tool_call_id(self) -> str: ...
    @property
    def parts(self) -> Sequence[Any]: ...


# Reads a message's parts, as the transport received them, into the domain's, recording
# every bad one under the given field (e.g. "history[3].parts").
PartsReader = Callable[[Sequence[Any], str, ImageLimits, Violations], tuple[ContentPart, ...]]


@dataclass(slots=True)
class InlineRequest:
    history: Sequence[ApiMessage]
    roles: Mapping[int, Role]  # the API's role numbers
    system_prompts: Sequence[str]
    user_message: str
    token_budget: int
    tokenizer: str  # a name: the app resolves it
    layers: PromptLayers | None = None
    compression_summary: CompressionSummary | None = None
    output_format: OutputFormat = OutputFormat.NEUTRAL
    overflow_policy: OverflowPolicy = OverflowPolicy.KEEP_REQUIRED
    # Fields the transport found invalid (values only it can read, such as its enum
    # numbers); they stand in as the defaults so the rest can still be checked.
    violations: Sequence[FieldViolation] = ()
    cache_layout: CacheLayout = CacheLayout.OFF
    # The user message as parts, as the transport received them (user_message then
    # empty), and how to read parts.
    user_parts: Sequence[Any] = ()
    read_parts: PartsReader | None = None


def chat_messages(
    messages: Iterable[ApiMessage],
    roles: Mapping[int, Role],
    field: str,
    violations: Violations,
    read_parts: PartsReader,
    limits: ImageLimits,
) -> list[ChatMessage]:
    """The messages in the domain model; an unknown role number is recorded and read as
    a user turn, so that the rest of the request can still be checked."""
    out: list[ChatMessage] = []
    for i, m in enumerate(messages):
        role = roles.get(m.role)
        if role is None:
            violations.add(f"{field}[{i}].role", f"unknown role {m.role}; use a ROLE_* value")
            role = Role.USER
        calls = m.tool_calls
        message = ChatMessage(
            role,
            m.content,
            tuple(ToolCall(c.id, c.name, c.arguments) for c in calls) if calls else (),
            m.tool_call_id,
            m.id,
        )
        if m.parts:
            message = _with_parts(message, m.parts, f"{field}[{i}]", violations, read_parts, limits)
        out.append(message)
    return out


def _with_parts(
    message: ChatMessage,
    raw_parts: Sequence[Any],
    at: str,
    violations: Violations,
    read_parts: PartsReader,
    limits: ImageLimits,
) -> ChatMessage:
    """The message with its parts, ``content`` their text view."""
    parts = read_parts(raw_parts, f"{at}.parts", limits, violations)
    if message.role is not Role.USER:
        violations.add(f"{at}.parts", "only user messages carry parts")
    if message.content:
        violations.add(f"{at}.content", "must be empty when parts are given")
    return ChatMessage(message.role, parts_text(parts), id=message.id, parts=parts)


def user_message_parts(
    user_message: str,
    raw_parts: Sequence[Any],
    field: str,
    violations: Violations,
    read_parts: PartsReader,
    limits: ImageLimits,
) -> tuple[str, tuple[ContentPart, ...]]:
    """The user message's text (the parts' text view when given) and parts; ``field``
    names the parts field."""
    if not raw_parts:
        return user_message, ()
    parts = read_parts(raw_parts, field, limits, violations)
    if user_message:
        violations.add(field, "give either the user message's text or its parts, not both")
    return parts_text(parts), parts

"""The neutral message model shared by every core step."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from contextd.core.content import ContentPart


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


# Messages are never mutated (steps make changed copies with dataclasses.replace);
# they are not frozen only because frozen dataclasses are five times slower to
# create, and a request creates one per history message.


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    # JSON object text, as OpenAI sends it; "" is treated as "{}".
    arguments: str = ""


@dataclass(slots=True)
class ChatMessage:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    # Caller-chosen id (compression summaries refer to it); "" when none.
    id: str = ""
    # A user message's text and images (core/content.py); ``content`` is then their
    # text view.
    parts: tuple[ContentPart, ...] = ()


@dataclass(frozen=True, slots=True)
class CompressionSummary:
    message_ids: tuple[str, ...]
    start_message_id: str
    summary: str

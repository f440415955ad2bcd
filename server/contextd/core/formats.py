"""Provider payloads built from a final neutral message list.

Both functions take the output of ``build_messages``: system messages first,
then history whose tool results directly follow their call, then the user message
(with the stable-prefix cache layout, after the system message holding the volatile
context layers).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from contextd.core.content import ContentPart, ImageDetail, TextPart
from contextd.core.messages import ChatMessage, Role
from contextd.core.pipeline import is_blank

JsonObject = dict[str, Any]


class OutputFormat(StrEnum):
    NEUTRAL = "neutral"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"


def _arguments_object(arguments: str) -> JsonObject:
    parsed = json.loads(arguments) if arguments.strip() else {}
    assert isinstance(parsed, dict), "validated earlier"
    return parsed


def openai_parts(parts: Sequence[ContentPart]) -> list[JsonObject]:
    """A message's parts as Chat Completions content parts; inline images as data: URLs."""
    out: list[JsonObject] = []
    for p in parts:
        if isinstance(p, TextPart):
            out.append({"type": "text", "text": p.text})
            continue
        url = p.url or f"data:{p.media_type};base64,{base64.b64encode(p.data).decode('ascii')}"
        image: JsonObject = {"url": url}
        if p.detail is not ImageDetail.AUTO:
            image["detail"] = p.detail.value
        out.append({"type": "image_url", "image_url": image})
    return out


def anthropic_parts(parts: Sequence[ContentPart]) -> list[JsonObject]:
    """A message's parts as Messages API content blocks (``image`` with a base64 or url
    source)."""
    out: list[JsonObject] = []
    for p in parts:
        if isinstance(p, TextPart):
            if p.text:  # the API refuses empty text blocks
                out.append({"type": "text", "text": p.text})
            continue
        source: JsonObject = (
            {"type": "url", "url": p.url}
            if p.url
            else {
                "type": "base64",
                "media_type": p.media_type,
                "data": base64.b64encode(p.data).decode("ascii"),
            }
        )
        out.append({"type": "image", "source": source})
    return out


def to_openai(messages: Sequence[ChatMessage]) -> JsonObject:
    """Chat Completions ``messages``."""
    out: list[JsonObject] = []
    for m in messages:
        if m.role is Role.TOOL:
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif m.role is Role.ASSISTANT and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.content if m.content.strip() else None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments.strip() or "{}"},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        elif m.parts:
            out.append({"role": m.role.value, "content": openai_parts(m.parts)})
        else:
            out.append({"role": m.role.value, "content": m.content})
    return {"messages": out}


def _anthropic_blocks(m: ChatMessage) -> list[JsonObject]:
    if m.role is Role.TOOL:
        block: JsonObject = {"type": "tool_result", "tool_use_id": m.tool_call_id}
        if not is_blank(m.content):
            block["content"] = m.content
        return [block]
    blocks: list[JsonObject] = []
    if m.parts:
        blocks.extend(anthropic_parts(m.parts))
    elif m.content.strip():
        blocks.append({"type": "text", "text": m.content})
    blocks.extend(
        {"type": "tool_use", "id": c.id, "name": c.name, "input": _arguments_object(c.arguments)}
        for c in m.tool_calls
    )
    return blocks


def to_anthropic(messages: Sequence[ChatMessage], cached_prefix: int | None = None) -> JsonObject:
    """Messages API ``system`` and ``messages``: system text apart, same roles merged.

    Tool results become ``tool_result`` blocks of a user turn, ahead of any text
    that follows them, as the API requires.

    ``cached_prefix`` (the stable-prefix cache layout): how many leading messages stay
    the same next turn. Then ``system`` is a list of text blocks, one per leading
    system message; a system message after the prefix (the volatile context layers)
    becomes a text block of the user turn it meets, as the API takes one system
    prompt only; and ``cache_control`` breakpoints mark the first system block and
    the last block of the prefix's history.
    """
    stable = len(messages) if cached_prefix is None else cached_prefix
    system: list[str] = []
    turns: list[JsonObject] = []
    prefix_end: JsonObject | None = None  # the last block of the prefix's history
    for i, m in enumerate(messages):
        if m.role is Role.SYSTEM and i < stable:
            system.append(m.content)
            continue
        role = "assistant" if m.role is Role.ASSISTANT else "user"
        blocks = _anthropic_blocks(m)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
        if i < stable and turns[-1]["content"]:
            prefix_end = turns[-1]["content"][-1]
    payload: JsonObject = {"messages": turns}
    if cached_prefix is None:
        if system:
            payload["system"] = "\n\n".join(system)
        return payload
    if prefix_end is not None:
        prefix_end["cache_control"] = _ephemeral()
    if system:
        blocks = [{"type": "text", "text": text} for text in system]
        blocks[0]["cache_control"] = _ephemeral()
        payload["system"] = blocks
    return payload


# A fresh dict per breakpoint: the payload is the caller's to change.
def _ephemeral() -> JsonObject:
    return {"type": "ephemeral"}


def render(
    output_format: OutputFormat, messages: Sequence[ChatMessage], cached_prefix: int | None = None
) -> JsonObject | None:
    """The payload of ``output_format``; ``cached_prefix``: see ``to_anthropic`` (OpenAI's
    cache needs no markers, only the same prefix)."""
    if output_format is OutputFormat.OPENAI:
        return to_openai(messages)
    if output_format is OutputFormat.ANTHROPIC:
        return to_anthropic(messages, cached_prefix)
    return None

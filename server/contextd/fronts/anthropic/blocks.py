"""Anthropic messages and their content blocks into the native turn.

Inline mode takes the whole list: ``system`` is the system prompt, the last message
(a user message) the user message, the messages before it the history; a user message's
``tool_result`` blocks become tool messages before its text and images. A list whose
last message holds tool results only is all history: the model goes on after them (a
stateless tool loop). Session mode takes only what is new: the last user message's text
and images, its tool results, or both: the results continue the session's turn and the
text and images are stored after them (the session holds everything before).

Thinking blocks an SDK sends back are left out (the provider is asked for none).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from contextd.fronts.chat_http.failure import excerpt, invalid
from contextd.fronts.chat_http.json_fields import (
    JsonObject,
    array,
    known_keys,
    obj,
    optional_bool,
    string,
)
from contextd.fronts.chat_http.params import ParamMap
from contextd.fronts.chat_http.turn import Turn
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb

_ROLES = {"user": pb.ROLE_USER, "assistant": pb.ROLE_ASSISTANT}
_CACHE = "cache_control"  # accepted on every block: contextd lays out the prompt cache
# Every field of the SDKs' own blocks, so that an answer can be sent back as it is;
# those that ask for nothing contextd does are accepted without effect.
_KEYS = {
    "text": frozenset({"type", "text", _CACHE, "citations"}),
    "image": frozenset({"type", "source", _CACHE, "transformations"}),
    "tool_use": frozenset({"type", "id", "name", "input", _CACHE, "caller", "toolset_name"}),
    "tool_result": frozenset(
        {"type", "tool_use_id", "content", "is_error", _CACHE, "toolset_name"}
    ),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
}
_USER_BLOCKS = ("text", "image", "tool_result")
_ASSISTANT_BLOCKS = ("text", "tool_use", "thinking", "redacted_thinking")
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def system_prompt(raw: object) -> str:
    """``system``: a string or text blocks, joined."""
    if raw is None or isinstance(raw, str):
        return raw or ""
    texts = []
    for k, item in enumerate(array(raw, "system")):
        block = obj(item, f"system[{k}]")
        if block.get("type") != "text":
            raise invalid(f"system[{k}].type", "system blocks must be text blocks")
        known_keys(block, _KEYS["text"], f"system[{k}]")
        texts.append(string(block.get("text"), f"system[{k}].text"))
    return "\n".join(texts)


def inline_turn(system: str, raw: object, params: ParamMap) -> Turn:
    """The whole list: the system prompt and history and, last, the user message (none
    when the list ends with tool results)."""
    messages, extra = _messages(raw)
    system = _joined(system, extra)
    last, message = messages[-1]
    if _role(message, last) != "user":
        raise invalid(
            f"messages[{last}].role",
            "the last message must be a user message (prefilling the answer is not supported)",
        )
    turn = Turn()
    if system:
        params.add("messages[0]", "system")
        turn.history.append(pb.Message(role=pb.ROLE_SYSTEM, content=system))
    for k, earlier in messages[:-1]:
        _into_history(earlier, k, turn.history, params)
    blocks = _blocks(message, last)
    results = [(j, b) for j, b in blocks if b.get("type") == "tool_result"]
    rest = [(j, b) for j, b in blocks if b.get("type") != "tool_result"]
    for j, block in results:
        at = f"messages[{last}].content[{j}]"
        params.add(f"messages[{len(turn.history)}]", at)
        turn.history.append(_tool_message(block, at))
    if rest:
        _user_message(rest, last, turn, params)
    return turn


def history(system: str, raw: object, params: ParamMap) -> list[pb.Message]:
    """The system prompt and every message, the last included, as native messages."""
    messages, extra = _messages(raw)
    system = _joined(system, extra)
    out = [pb.Message(role=pb.ROLE_SYSTEM, content=system)] if system else []
    if system:
        params.add("messages[0]", "system")
    for k, message in messages:
        _into_history(message, k, out, params)
    return out


def session_turn(raw: object, params: ParamMap) -> Turn:
    """The last user message: its tool results, its text and images, or both (system
    messages, like ``system``, are the session's to give)."""
    messages, _ = _messages(raw)
    last, message = messages[-1]
    if _role(message, last) != "user":
        raise invalid(f"messages[{last}].role", "the last message must be a user message")
    blocks = _blocks(message, last)
    results = [(j, b) for j, b in blocks if b.get("type") == "tool_result"]
    rest = [(j, b) for j, b in blocks if b.get("type") != "tool_result"]
    turn = Turn()
    for j, block in results:
        at = f"messages[{last}].content[{j}]"
        params.add(f"tool_results[{len(turn.tool_results)}]", at)
        result = _tool_message(block, at)
        turn.tool_results.append(
            cpb.ToolResult(tool_call_id=result.tool_call_id, content=result.content)
        )
    if rest or not results:
        _user_message(rest, last, turn, params)
    return turn


def _messages(raw: object) -> tuple[list[tuple[int, JsonObject]], list[str]]:
    """The user and assistant messages with their indexes, and the text of the system
    messages among them that the model is shown: each, unless its ``clear_at`` is
    ``next_user_message`` and a user message follows it."""
    items = array(raw, "messages")
    if not items:
        raise invalid("messages", "at least one message is required")
    out: list[tuple[int, JsonObject]] = []
    system: list[tuple[int, str, bool]] = []  # index, text, shown until a user message
    for k, item in enumerate(items):
        message = obj(item, f"messages[{k}]")
        if message.get("role") == "system":
            system.append((k, *_system_message(message, k)))
            continue
        known_keys(message, frozenset({"role", "content"}), f"messages[{k}]")
        out.append((k, message))
    if not out:
        raise invalid("messages", "a user message is required")
    last_user = max((k for k, m in out if m.get("role") == "user"), default=-1)
    return out, [text for k, text, until_user in system if not (until_user and k < last_user)]


def _system_message(message: JsonObject, k: int) -> tuple[str, bool]:
    """A system message's text, and whether it is shown only until the next user
    message; its ``output_config`` (``effort``) is accepted without effect."""
    at = f"messages[{k}]"
    known_keys(message, frozenset({"role", "content", "clear_at", "output_config"}), at)
    clear_at = message.get("clear_at")
    if clear_at not in (None, "never", "next_user_message"):
        raise invalid(f"{at}.clear_at", "must be never or next_user_message")
    config = message.get("output_config")
    if config is not None:
        known_keys(obj(config, f"{at}.output_config"), frozenset({"effort"}), at)
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or "", clear_at == "next_user_message"
    texts = []
    for j, item in enumerate(array(content, f"{at}.content")):
        block = obj(item, f"{at}.content[{j}]")
        if block.get("type") != "text":
            raise invalid(f"{at}.content[{j}].type", "a system message holds text blocks only")
        known_keys(block, _KEYS["text"], f"{at}.content[{j}]")
        texts.append(string(block.get("text"), f"{at}.content[{j}].text"))
    return "\n".join(texts), clear_at == "next_user_message"


def _joined(system: str, extra: list[str]) -> str:
    return "\n".join(t for t in (system, *extra) if t)


def _role(message: JsonObject, k: int) -> str:
    role = message.get("role")
    if role not in _ROLES:
        raise invalid(
            f"messages[{k}].role", f"must be user, assistant or system, not {excerpt(role)}"
        )
    return str(role)


def _blocks(message: JsonObject, k: int) -> list[tuple[int, JsonObject]]:
    """The message's content blocks, a string as one text block; each checked."""
    at = f"messages[{k}].content"
    content = message.get("content")
    if isinstance(content, str):
        return [(0, {"type": "text", "text": content})]
    allowed = _USER_BLOCKS if _role(message, k) == "user" else _ASSISTANT_BLOCKS
    blocks = []
    for j, item in enumerate(array(content, at)):
        block = obj(item, f"{at}[{j}]")
        kind = block.get("type")
        if kind not in allowed:
            raise invalid(
                f"{at}[{j}].type",
                f"{excerpt(kind)} blocks are not supported here (use {', '.join(allowed)})",
            )
        known_keys(block, _KEYS[str(kind)], f"{at}[{j}]")
        blocks.append((j, block))
    return blocks


def _into_history(message: JsonObject, k: int, history: list[pb.Message], params: ParamMap) -> None:
    """A message of the history as native messages: an assistant message with its tool
    calls, or a user message's tool results (tool messages) then its text and images."""
    at = f"messages[{k}]"
    blocks = _blocks(message, k)
    if _role(message, k) == "assistant":
        params.add(f"messages[{len(history)}]", at)
        history.append(_assistant(blocks, at, params, f"messages[{len(history)}]"))
        return
    rest = []
    for j, block in blocks:
        if block.get("type") == "tool_result":
            params.add(f"messages[{len(history)}]", f"{at}.content[{j}]")
            history.append(_tool_message(block, f"{at}.content[{j}]"))
        else:
            rest.append((j, block))
    if rest:
        native = f"messages[{len(history)}]"
        params.add(native, at)
        user = pb.Message(role=pb.ROLE_USER)
        parts = _parts(rest, f"{at}.content", params, f"{native}.parts")
        if any(p.HasField("image") for p in parts):
            user.parts.extend(parts)
        else:
            user.content = "\n".join(p.text for p in parts)
        history.append(user)


def _assistant(
    blocks: list[tuple[int, JsonObject]], at: str, params: ParamMap, native: str
) -> pb.Message:
    out = pb.Message(role=pb.ROLE_ASSISTANT)
    texts = []
    for j, block in blocks:
        where = f"{at}.content[{j}]"
        kind = block.get("type")
        if kind == "text":
            texts.append(string(block.get("text"), f"{where}.text"))
        elif kind == "tool_use":
            i = len(out.tool_calls)
            params.add(f"{native}.tool_calls[{i}].id", f"{where}.id")
            params.add(f"{native}.tool_calls[{i}].name", f"{where}.name")
            params.add(f"{native}.tool_calls[{i}].arguments", f"{where}.input")
            out.tool_calls.append(
                pb.ToolCall(
                    id=string(block.get("id"), f"{where}.id"),
                    name=string(block.get("name"), f"{where}.name"),
                    arguments=json.dumps(obj(block.get("input"), f"{where}.input")),
                )
            )
    out.content = "".join(texts)
    return out


def _tool_message(block: JsonObject, at: str) -> pb.Message:
    """A tool_result block as a tool message; an error result says so in its text (the
    native tool result has no flag for it)."""
    text = _result_text(block.get("content"), f"{at}.content")
    if optional_bool(block.get("is_error"), f"{at}.is_error"):
        text = f"Error: {text}"
    return pb.Message(
        role=pb.ROLE_TOOL,
        tool_call_id=string(block.get("tool_use_id"), f"{at}.tool_use_id"),
        content=text,
    )


def _result_text(content: object, at: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for j, item in enumerate(array(content, at)):
        block = obj(item, f"{at}[{j}]")
        if block.get("type") != "text":
            raise invalid(f"{at}[{j}].type", "a tool result carries text blocks only")
        known_keys(block, _KEYS["text"], f"{at}[{j}]")
        texts.append(string(block.get("text"), f"{at}[{j}].text"))
    return "\n".join(texts)


def _user_message(
    blocks: list[tuple[int, JsonObject]], k: int, turn: Turn, params: ParamMap
) -> None:
    at = f"messages[{k}].content"
    parts = _parts(blocks, at, params, "user_message_parts")
    params.add("user_message", at)
    if any(p.HasField("image") for p in parts):
        turn.user_parts.extend(parts)
    else:
        turn.user_message = "\n".join(p.text for p in parts)


def _parts(
    blocks: list[tuple[int, JsonObject]], at: str, params: ParamMap, native: str
) -> list[pb.ContentPart]:
    """Text and image blocks as native parts (``native``: where they go)."""
    parts: list[pb.ContentPart] = []
    for j, block in blocks:
        where = f"{at}[{j}]"
        params.add(f"{native}[{len(parts)}]", where)
        if block.get("type") == "text":
            parts.append(pb.ContentPart(text=string(block.get("text"), f"{where}.text")))
            continue
        if block.get("type") != "image":
            raise invalid(f"{where}.type", "only text and image blocks are supported here")
        for source in ("url", "data", "media_type"):
            params.add(f"{native}[{len(parts)}].image.{source}", f"{where}.source")
        parts.append(pb.ContentPart(image=_image(block.get("source"), f"{where}.source")))
    return parts


def _image(raw: Any, at: str) -> pb.ImagePart:
    source = obj(raw, at)
    kind = source.get("type")
    if kind == "url":
        known_keys(source, frozenset({"type", "url"}), at)
        return pb.ImagePart(url=string(source.get("url"), f"{at}.url"))
    if kind != "base64":
        raise invalid(f"{at}.type", "an image source must be base64 or url")
    known_keys(source, frozenset({"type", "media_type", "data"}), at)
    media_type = string(source.get("media_type"), f"{at}.media_type")
    if media_type not in _IMAGE_TYPES:
        raise invalid(f"{at}.media_type", f"must be one of {', '.join(sorted(_IMAGE_TYPES))}")
    try:
        data = base64.b64decode(string(source.get("data"), f"{at}.data"), validate=True)
    except (binascii.Error, ValueError):
        raise invalid(f"{at}.data", "not base64") from None
    return pb.ImagePart(data=data, media_type=media_type)

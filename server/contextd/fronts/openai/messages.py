"""OpenAI chat messages into the native turn: the history of an inline turn, the user
message, or the tool results that continue a session's turn.

Inline mode takes the whole list: leading system (and developer) messages are the
system prompt, the last message is the user message, the rest the history (a list
that ends with tool results is all history: the model goes on after them). Session
mode takes only what is new: the last user message, or the tool messages that end
the list (the session holds everything before).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from contextd.fronts.chat_http.failure import excerpt, invalid
from contextd.fronts.chat_http.json_fields import (
    JsonObject,
    array,
    known_keys,
    obj,
    optional_string,
    string,
)
from contextd.fronts.chat_http.params import ParamMap
from contextd.fronts.chat_http.turn import Turn, trailing_results
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb

_ROLES = {
    "system": pb.ROLE_SYSTEM,
    "developer": pb.ROLE_SYSTEM,
    "user": pb.ROLE_USER,
    "assistant": pb.ROLE_ASSISTANT,
    "tool": pb.ROLE_TOOL,
}
_KEYS = {
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    # Every field of the SDKs' own response message, so that it can be sent back as it is.
    "assistant": frozenset(
        {
            "role",
            "content",
            "name",
            "tool_calls",
            "refusal",
            "audio",
            "function_call",
            "annotations",
        }
    ),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}
_DETAILS = {
    "auto": pb.IMAGE_DETAIL_AUTO,
    "low": pb.IMAGE_DETAIL_LOW,
    "high": pb.IMAGE_DETAIL_HIGH,
}
_PART_KEYS = {
    "text": frozenset({"type", "text"}),
    "refusal": frozenset({"type", "refusal"}),
    "image_url": frozenset({"type", "image_url"}),
}


def inline_turn(raw: object, params: ParamMap) -> Turn:
    """The whole list: the history and, last, the user message; or, for a list that ends
    with tool results, all of it as the history the model goes on from."""
    messages = _messages(raw)
    last = len(messages) - 1
    role = _role(messages[last], last)
    if role not in ("user", "tool"):
        raise invalid(
            f"messages[{last}].role", "the last message must be a user message or a tool result"
        )
    turn = Turn()
    ends = last if role == "user" else last + 1
    for k, message in enumerate(messages[:ends]):
        native = len(turn.history)
        turn.history.append(_message(message, k, params, f"messages[{native}]"))
    if role == "user":
        _user_message(messages[last], last, turn, params)
    return turn


def session_turn(raw: object, params: ParamMap) -> Turn:
    """The last user message, or the tool messages that end the list."""
    messages = _messages(raw)
    last = len(messages) - 1
    role = _role(messages[last], last)
    turn = Turn()
    if role == "user":
        _user_message(messages[last], last, turn, params)
        return turn
    if role != "tool":
        raise invalid(
            f"messages[{last}].role", "the last message must be a user message or a tool result"
        )
    results = trailing_results(len(messages), lambda k: _role(messages[k], k) == "tool")
    for n, k in enumerate(results):
        message = messages[k]
        at = f"messages[{k}]"
        known_keys(message, _KEYS["tool"], at)
        params.add(f"tool_results[{n}]", at)
        turn.tool_results.append(
            cpb.ToolResult(
                tool_call_id=string(message.get("tool_call_id"), f"{at}.tool_call_id"),
                content=_text(message.get("content"), f"{at}.content"),
            )
        )
    return turn


def _messages(raw: object) -> list[JsonObject]:
    items = array(raw, "messages")
    if not items:
        raise invalid("messages", "at least one message is required", code="empty_array")
    return [obj(item, f"messages[{k}]") for k, item in enumerate(items)]


def _role(message: JsonObject, k: int) -> str:
    role = message.get("role")
    if role not in _ROLES:
        if role == "function":
            raise invalid(f"messages[{k}].role", "function messages are not supported; use tools")
        raise invalid(f"messages[{k}].role", f"unknown role {excerpt(role)}")
    return str(role)


def _message(message: JsonObject, k: int, params: ParamMap, native: str) -> pb.Message:
    at = f"messages[{k}]"
    role = _role(message, k)
    known_keys(message, _KEYS[role], at)
    params.add(native, at)
    out = pb.Message(role=_ROLES[role])
    content = message.get("content")
    if role == "user" and isinstance(content, list):
        out.parts.extend(_parts(content, f"{at}.content", params, f"{native}.parts"))
    else:
        out.content = _text(content, f"{at}.content")
    if role == "tool":
        out.tool_call_id = string(message.get("tool_call_id"), f"{at}.tool_call_id")
    if role == "assistant":
        # A response's audio (a reference to audio the model said) and annotations (URL
        # citations) are not part of what the model is sent again.
        if message.get("function_call") is not None:
            raise invalid(f"{at}.function_call", "not supported; use tool_calls")
        if message.get("annotations") is not None:
            array(message["annotations"], f"{at}.annotations")
        if message.get("audio") is not None:
            obj(message["audio"], f"{at}.audio")
        if message.get("refusal") and not out.content:
            out.content = string(message["refusal"], f"{at}.refusal")
        calls = message.get("tool_calls")
        for i, call in enumerate(array(calls, f"{at}.tool_calls") if calls is not None else []):
            out.tool_calls.append(_tool_call(call, f"{at}.tool_calls[{i}]"))
            params.add(f"{native}.tool_calls[{i}].name", f"{at}.tool_calls[{i}].function.name")
            params.add(
                f"{native}.tool_calls[{i}].arguments", f"{at}.tool_calls[{i}].function.arguments"
            )
    return out


def _user_message(message: JsonObject, k: int, turn: Turn, params: ParamMap) -> None:
    at = f"messages[{k}]"
    known_keys(message, _KEYS["user"], at)
    content = message.get("content")
    if isinstance(content, list):
        turn.user_parts.extend(_parts(content, f"{at}.content", params, "user_message_parts"))
        params.add("user_message", f"{at}.content")
    else:
        turn.user_message = _text(content, f"{at}.content")
        params.add("user_message", f"{at}.content")


def _text(content: object, at: str) -> str:
    """A string, or text parts joined (null is empty)."""
    if not isinstance(content, list):
        return optional_string(content, at)
    texts = []
    for j, item in enumerate(content):
        part = obj(item, f"{at}[{j}]")
        kind = part.get("type")
        if kind not in ("text", "refusal"):
            raise invalid(f"{at}[{j}].type", "only text parts are supported here")
        known_keys(part, _PART_KEYS[str(kind)], f"{at}[{j}]")
        texts.append(string(part.get(str(kind)), f"{at}[{j}].{kind}"))
    return "\n".join(texts)


def _parts(content: list[Any], at: str, params: ParamMap, native: str) -> list[pb.ContentPart]:
    parts = []
    for j, item in enumerate(content):
        where = f"{at}[{j}]"
        part = obj(item, where)
        kind = part.get("type")
        if kind not in ("text", "image_url"):
            raise invalid(f"{where}.type", f"unsupported content part type {excerpt(kind)}")
        known_keys(part, _PART_KEYS[str(kind)], where)
        params.add(f"{native}[{j}]", where)
        if kind == "text":
            parts.append(pb.ContentPart(text=string(part.get("text"), f"{where}.text")))
            continue
        params.add(f"{native}[{j}].image", f"{where}.image_url")
        for source in ("url", "data"):  # both come from the image's URL
            params.add(f"{native}[{j}].image.{source}", f"{where}.image_url.url")
        parts.append(pb.ContentPart(image=_image(part.get("image_url"), f"{where}.image_url")))
    return parts


def _image(raw: object, at: str) -> pb.ImagePart:
    image = obj(raw, at)
    known_keys(image, frozenset({"url", "detail"}), at)
    return image_part(string(image.get("url"), f"{at}.url"), image.get("detail"), at, f"{at}.url")


def image_part(url: str, detail: object, at: str, url_at: str) -> pb.ImagePart:
    """An image by its https or ``data:`` URL, with its detail (auto when None)."""
    detail = "auto" if detail is None else detail
    if detail not in _DETAILS:
        raise invalid(f"{at}.detail", "must be auto, low or high")
    out = pb.ImagePart(detail=_DETAILS[str(detail)])
    if not url.startswith("data:"):
        out.url = url
        return out
    head, comma, data = url[len("data:") :].partition(",")
    media_type, _, encoding = head.partition(";")
    if not comma or encoding != "base64":
        raise invalid(url_at, "a data URL must be data:<media type>;base64,<data>")
    try:
        out.data = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise invalid(url_at, "the data URL's data is not base64") from None
    out.media_type = media_type
    return out


def _tool_call(raw: object, at: str) -> pb.ToolCall:
    call = obj(raw, at)
    known_keys(call, frozenset({"id", "type", "function"}), at)
    if call.get("type", "function") != "function":
        raise invalid(f"{at}.type", "only function tool calls are supported")
    function = obj(call.get("function"), f"{at}.function")
    known_keys(function, frozenset({"name", "arguments"}), f"{at}.function")
    return pb.ToolCall(
        id=string(call.get("id"), f"{at}.id"),
        name=string(function.get("name"), f"{at}.function.name"),
        arguments=optional_string(function.get("arguments"), f"{at}.function.arguments"),
    )

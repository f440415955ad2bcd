"""Message dicts <-> the generated ``pb.Message`` (with its tool calls, role and parts).

A message's ``content`` is a string, or a list of parts (text and images, see _parts.py);
a message read back has its parts under ``"parts"`` (its content then "").

A role such as ``"unknown(42)"`` (a number this client does not know) goes back to the
server as 42, so messages from a newer server can be fed back in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeAlias, cast

from ._fields import _UNKNOWN_NUMBER, _enum_name, _ident, _sequence, _text, _type_name
from ._parts import part_from_pb, parts_to_pb
from ._pb import context_pb2 as pb

#: A message as a dict (see the README), or a generated ``pb.Message``.
MessageLike: TypeAlias = Mapping[str, Any] | pb.Message

_ROLES: dict[str, pb.Role] = {
    "system": pb.ROLE_SYSTEM,
    "user": pb.ROLE_USER,
    "assistant": pb.ROLE_ASSISTANT,
    "tool": pb.ROLE_TOOL,
}
_ROLE_NAMES: dict[int, str] = {number: name for name, number in _ROLES.items()}


def _arguments(value: object, where: str) -> str:
    """Tool call arguments: JSON text as given, or any other value encoded as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise TypeError(f"{where} cannot be encoded as JSON: {error}") from error


def _role(value: object, where: str) -> pb.Role:
    """A role name; an unknown name becomes ROLE_UNSPECIFIED so the server names the field.

    ``"unknown(N)"``, the name :func:`role_name` gives a role number this client does
    not know, is sent back as N, so messages from a newer server can be fed back in.
    """
    if value is None:
        return pb.ROLE_UNSPECIFIED
    if isinstance(value, str):
        known = _ROLES.get(value)
        if known is not None:
            return known
        number = _UNKNOWN_NUMBER.fullmatch(value)
        if number is not None and -(2**31) <= int(number[1]) < 2**31:
            return cast(pb.Role, int(number[1]))
        return pb.ROLE_UNSPECIFIED
    if isinstance(value, int) and not isinstance(value, bool):
        return cast(pb.Role, value)  # a pb.Role number
    raise TypeError(f"{where} must be a role name such as 'user', not {_type_name(value)}")


def tool_call_to_pb(call: object, where: str) -> pb.ToolCall:
    """``{"id", "name", "arguments"}`` or OpenAI's ``{"id", "type", "function": {...}}``."""
    if isinstance(call, pb.ToolCall):
        return call
    if not isinstance(call, Mapping):
        raise TypeError(f"{where} must be a mapping, not {_type_name(call)}")
    source: Mapping[str, Any] = call
    function = call.get("function")
    if function is not None:
        if not isinstance(function, Mapping):
            raise TypeError(f"{where}.function must be a mapping, not {_type_name(function)}")
        source = function
    return pb.ToolCall(
        id=_ident(call.get("id"), f"{where}.id"),
        name=_text(source.get("name"), f"{where}.name"),
        arguments=_arguments(source.get("arguments"), f"{where}.arguments"),
    )


def message_to_pb(message: object, where: str) -> pb.Message:
    """A message dict (unknown keys such as "tokens" are ignored) or a ``pb.Message``."""
    if isinstance(message, pb.Message):
        return message
    if not isinstance(message, Mapping):
        raise TypeError(f"{where} must be a message mapping, not {_type_name(message)}")
    calls = message.get("tool_calls")
    calls = () if calls is None else _sequence(calls, f"{where}.tool_calls", "tool calls")
    content = message.get("content")
    parts = message.get("parts")
    if content is not None and not isinstance(content, str):
        parts, content = content, None  # a list of parts as the content, OpenAI-style
    return pb.Message(
        id=_ident(message.get("id"), f"{where}.id"),
        role=_role(message.get("role"), f"{where}.role"),
        content=_text(content, f"{where}.content"),
        tool_calls=[tool_call_to_pb(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(calls)],
        tool_call_id=_ident(message.get("tool_call_id"), f"{where}.tool_call_id"),
        parts=[] if parts is None else parts_to_pb(parts, f"{where}.parts"),
    )


def messages_to_pb(messages: object, where: str) -> list[pb.Message]:
    items = _sequence(messages, where, "message mappings")
    return [message_to_pb(m, f"{where}[{i}]") for i, m in enumerate(items)]


def role_name(role: int) -> str:
    """The role's name as in message dicts: "user", ..., "unspecified" or "unknown(N)"."""
    known = _ROLE_NAMES.get(role)
    return known if known is not None else _enum_name(pb.Role, role, "ROLE_")


def message_from_pb(message: pb.Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": role_name(message.role), "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    if message.parts:
        out["parts"] = [part_from_pb(p) for p in message.parts]
    if message.id:
        out["id"] = message.id
    out["tokens"] = message.tokens
    return out

"""Native messages as the JSON objects the MCP tools return (snake_case names, enums
by name, timestamps in RFC 3339, as the protobuf JSON mapping writes them)."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

_ROLES = {
    pb.ROLE_SYSTEM: "system",
    pb.ROLE_USER: "user",
    pb.ROLE_ASSISTANT: "assistant",
    pb.ROLE_TOOL: "tool",
}


def as_json(message: Message) -> dict[str, Any]:
    found: dict[str, Any] = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return found


def memory(m: mpb.Memory) -> dict[str, Any]:
    out = {"id": m.id, "content": m.content, "create_time": _time(m, "create_time")}
    if m.source_session_id:
        out["source_session_id"] = m.source_session_id
    return out


def scored_memory(s: mpb.ScoredMemory) -> dict[str, Any]:
    return {**memory(s.memory), "score": round(s.score, 6)}


def session(s: spb.Session) -> dict[str, Any]:
    return {
        "id": s.id,
        "title": s.title,
        "scenario": s.scenario,
        "host": s.host,
        "metadata": dict(s.metadata),
        "message_count": s.message_count,
        "create_time": _time(s, "create_time"),
        "update_time": _time(s, "update_time"),
    }


def message(m: pb.Message) -> dict[str, Any]:
    """A message as a model reads it: role, text (images described, never their bytes),
    tool calls and the call a tool result answers."""
    out: dict[str, Any] = {"role": _ROLES.get(m.role, "unknown"), "content": _text(m)}
    if m.id:
        out["id"] = m.id
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments or "{}"} for c in m.tool_calls
        ]
    if m.tool_call_id:
        out["tool_call_id"] = m.tool_call_id
    return out


def session_message(s: spb.SessionMessage) -> dict[str, Any]:
    out = {
        **message(s.message),
        "seq": s.seq,
        "turn_index": s.turn_index,
        "create_time": _time(s, "create_time"),
    }
    if s.status:
        out["status"] = s.status
    return out


def _text(m: pb.Message) -> str:
    if not m.parts:
        return m.content
    pieces = []
    for part in m.parts:
        if part.WhichOneof("part") == "text":
            pieces.append(part.text)
        else:
            image = part.image
            kind = image.media_type or "image"
            pieces.append(f"[{kind} {image.url}]" if image.url else f"[{kind}]")
    return "\n".join(pieces)


def _time(m: Message, name: str) -> str:
    if not m.HasField(name):
        return ""
    stamp = getattr(m, name)
    text: str = stamp.ToJsonString()
    return text

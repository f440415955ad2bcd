"""What the MCP tools return: one model per kind of result, from which the SDK writes
each tool's output schema, and the functions that fill them from native messages
(snake_case names, times in RFC 3339, as the protobuf JSON mapping writes them)."""

from __future__ import annotations

from typing import Annotated, Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

_ROLES = {
    pb.ROLE_SYSTEM: "system",
    pb.ROLE_USER: "user",
    pb.ROLE_ASSISTANT: "assistant",
    pb.ROLE_TOOL: "tool",
}
Time = str  # RFC 3339; "" when unset


# --- the parts ------------------------------------------------------------------------


class Scope(BaseModel):
    agent: str = Field(description="the agent of the host it belongs to; empty: every agent")
    app: str = Field(description="the host application it belongs to; empty: every app")


class Memory(BaseModel):
    id: str
    content: str
    scope: Scope
    metadata: dict[str, str] = Field(description="the host's own labels")
    create_time: Time
    update_time: Time
    valid_from: Time = Field(description="when the fact became true; empty: not known")
    valid_to: Time = Field(description="when it stopped being true; empty: it still is")
    expire_time: Time = Field(description="when it is forgotten; empty: never")
    superseded_by: str = Field(description="the memory that replaced this fact; empty: none")
    source_session_id: str = Field(description="the session it was learnt in; empty: unknown")


class ScoredMemory(Memory):
    score: float = Field(description="relevance weighted by recency, higher is better")


class Session(BaseModel):
    id: str
    title: str
    scenario: str
    host: str
    metadata: dict[str, str]
    message_count: int
    create_time: Time
    update_time: Time


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: str = Field(description="the arguments as JSON text")


class ChatMessage(BaseModel):
    role: str = Field(description="system, user, assistant or tool")
    content: str = Field(description="the text; an image as [media type URL], never its bytes")
    tool_calls: list[ToolCall] = Field(description="the tools an assistant message calls")
    tool_call_id: str = Field(description="the call a tool message answers; empty otherwise")


class SessionMessage(ChatMessage):
    id: str
    seq: int = Field(description="its position in the session")
    turn_index: int
    status: str = Field(description="how its turn ended when not complete; empty otherwise")
    create_time: Time


# --- the tools' results -----------------------------------------------------------------


class FoundMemories(BaseModel):
    memories: list[ScoredMemory] = Field(description="the most relevant first")
    note: str = Field(description="why the ranking is by terms only, when it is; else empty")


class _Page(BaseModel):
    """One page of a list, and where the next one starts."""

    next_page_token: str = Field(description="for the next page; empty after the last")


class MemoryPage(_Page):
    memories: list[Memory] = Field(description="newest first")


class AddedMemory(BaseModel):
    memory: Memory
    created: bool = Field(description="false when the user already had this memory")


class ChangedMemory(BaseModel):
    memory: Memory


class DeletedMemory(BaseModel):
    deleted: str = Field(description="the id of the memory forgotten")


class CreatedSession(BaseModel):
    session: Session


class SessionPage(_Page):
    sessions: list[Session] = Field(description="most recently active first")


class MessagePage(_Page):
    messages: list[SessionMessage] = Field(description="oldest first")


class PayloadMessage(BaseModel):
    """A message in the API's own shape (its other members by role: tool_calls,
    tool_call_id...)."""

    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = Field(description="text or the API's blocks")


class Payload(BaseModel):
    """The request body fragment of the API output_format names."""

    model_config = ConfigDict(extra="forbid")
    messages: list[PayloadMessage]
    system: str | list[dict[str, Any]] | None = Field(
        None, description="the Messages API's system prompt; null for Chat Completions"
    )


def proto_schema(descriptor: Descriptor) -> dict[str, Any]:
    """The JSON schema of a native message as ``as_json`` writes it: the protobuf JSON
    mapping with the proto names, every field without presence written."""
    return {
        "type": "object",
        "properties": {f.name: _field_schema(f) for f in descriptor.fields},
        "required": [f.name for f in descriptor.fields if not f.has_presence],
        "additionalProperties": False,
    }


class BuiltContext(BaseModel):
    messages: list[ChatMessage] = Field(
        description="what the model should see: system prompt, history, the question"
    )
    report: Annotated[dict[str, Any], WithJsonSchema(proto_schema(pb.BuildReport.DESCRIPTOR))] = (
        Field(
            description="what was kept and dropped: the BuildReport, every field (tokens, "
            "context_layers, dropped items, edits)"
        )
    )
    payload: Payload | None = Field(
        description="with output_format openai or anthropic: the request body fragment "
        "for that API; else null"
    )


# --- from native messages ---------------------------------------------------------------

_FD = FieldDescriptor
_SCALARS: dict[int, dict[str, Any]] = {
    _FD.CPPTYPE_INT32: {"type": "integer"},
    _FD.CPPTYPE_UINT32: {"type": "integer"},
    # 64-bit integers are decimal strings in the JSON mapping.
    _FD.CPPTYPE_INT64: {"type": "string"},
    _FD.CPPTYPE_UINT64: {"type": "string"},
    _FD.CPPTYPE_DOUBLE: {"type": "number"},
    _FD.CPPTYPE_FLOAT: {"type": "number"},
    _FD.CPPTYPE_BOOL: {"type": "boolean"},
    _FD.CPPTYPE_STRING: {"type": "string"},
}
_AS_TEXT = {"google.protobuf.Timestamp", "google.protobuf.Duration"}


def _field_schema(field: FieldDescriptor) -> dict[str, Any]:
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        return {"type": "object", "additionalProperties": _value_schema(entry.fields[1])}
    one = _value_schema(field)
    return {"type": "array", "items": one} if field.is_repeated else one


def _value_schema(field: FieldDescriptor) -> dict[str, Any]:
    message, enum = field.message_type, field.enum_type
    if message is not None:
        return {"type": "string"} if message.full_name in _AS_TEXT else proto_schema(message)
    if enum is not None:
        return {"type": "string", "enum": [v.name for v in enum.values]}
    return dict(_SCALARS[field.cpp_type])


def as_json(message: Message) -> dict[str, Any]:
    found: dict[str, Any] = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return found


def memory(m: mpb.Memory) -> Memory:
    return Memory(
        id=m.id,
        content=m.content,
        scope=Scope(agent=m.scope.agent, app=m.scope.app),
        metadata=dict(m.metadata),
        create_time=_time(m, "create_time"),
        update_time=_time(m, "update_time"),
        valid_from=_time(m, "valid_from"),
        valid_to=_time(m, "valid_to"),
        expire_time=_time(m, "expire_time"),
        superseded_by=m.superseded_by,
        source_session_id=m.source_session_id,
    )


def scored_memory(s: mpb.ScoredMemory) -> ScoredMemory:
    return ScoredMemory(**memory(s.memory).model_dump(), score=round(s.score, 6))


def session(s: spb.Session) -> Session:
    return Session(
        id=s.id,
        title=s.title,
        scenario=s.scenario,
        host=s.host,
        metadata=dict(s.metadata),
        message_count=s.message_count,
        create_time=_time(s, "create_time"),
        update_time=_time(s, "update_time"),
    )


def message(m: pb.Message) -> ChatMessage:
    """A message as a model reads it: role, text (images described, never their bytes),
    tool calls and the call a tool result answers."""
    return ChatMessage(
        role=_ROLES.get(m.role, "unknown"),
        content=_text(m),
        tool_calls=[
            ToolCall(id=c.id, name=c.name, arguments=c.arguments or "{}") for c in m.tool_calls
        ],
        tool_call_id=m.tool_call_id,
    )


def session_message(s: spb.SessionMessage) -> SessionMessage:
    return SessionMessage(
        **message(s.message).model_dump(),
        id=s.message.id,
        seq=s.seq,
        turn_index=s.turn_index,
        status=s.status,
        create_time=_time(s, "create_time"),
    )


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

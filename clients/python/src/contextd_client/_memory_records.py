"""Requests and results of the memory calls: scopes, metadata, validity and expiry on a
memory, the filter of a search or listing, an update's changes, and history rows.

Times are aware datetimes (a naive one is refused: its zone would be a guess).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.timestamp_pb2 import Timestamp

from ._fields import _ident, _int, _text, _type_name
from ._pb import memory_pb2 as mpb
from ._record_types import MemoryChange

FILTER_KEYS = (
    "agent",
    "app",
    "metadata",
    "created_after",
    "created_before",
    "updated_after",
    "updated_before",
    "as_of",
)
#: What ``update_memory`` may change (the keys of its ``changes``).
CHANGE_KEYS = ("content", "scope", "metadata", "valid_from", "valid_to", "expire_time")
_TIMES = ("valid_from", "valid_to", "expire_time")


def _when(value: object, where: str) -> Timestamp:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise TypeError(f"{where} must be an aware datetime, not {_type_name(value)}")
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts


def _time(message: Any, name: str) -> datetime | None:
    """A Timestamp field as an aware UTC datetime; ``None`` when unset."""
    if not message.HasField(name):
        return None
    return cast(datetime, getattr(message, name).ToDatetime(tzinfo=UTC))


def _pairs(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{where} must be a mapping of strings, not {_type_name(value)}")
    return {_text(k, f"{where} key"): _text(v, f"{where}[{k!r}]") for k, v in value.items()}


def _scope(value: object, where: str) -> mpb.MemoryScope:
    if value is None:
        return mpb.MemoryScope()
    if not isinstance(value, Mapping) or set(value) - {"agent", "app"}:
        raise TypeError(f"{where} must be a mapping with the keys agent and app")
    return mpb.MemoryScope(
        agent=_text(value.get("agent", ""), f"{where}['agent']"),
        app=_text(value.get("app", ""), f"{where}['app']"),
    )


def memory_fields(memory: mpb.Memory) -> dict[str, Any]:
    """The scope, metadata, validity and expiry of a memory."""
    return {
        "scope": {"agent": memory.scope.agent, "app": memory.scope.app},
        "metadata": dict(memory.metadata),
        "valid_from": _time(memory, "valid_from"),
        "valid_to": _time(memory, "valid_to"),
        "expire_time": _time(memory, "expire_time"),
        "superseded_by": memory.superseded_by,
    }


def add_fields(
    scope: object,
    metadata: object,
    valid_from: datetime | None,
    valid_to: datetime | None,
    expire_time: datetime | None,
) -> dict[str, Any]:
    """AddMemoryRequest's fields for these; unset times left out."""
    fields: dict[str, Any] = {
        "scope": _scope(scope, "scope"),
        "metadata": _pairs(metadata, "metadata"),
    }
    for name, value in (
        ("valid_from", valid_from),
        ("valid_to", valid_to),
        ("expire_time", expire_time),
    ):
        if value is not None:
            fields[name] = _when(value, name)
    return fields


def memory_filter(value: object) -> mpb.MemoryFilter:
    """``{"app": "word", "metadata": {...}, "as_of": datetime, ...}`` (keys as in
    MemoryFilter) as the message; None for no filter."""
    if value is None:
        return mpb.MemoryFilter()
    if not isinstance(value, Mapping):
        raise TypeError(f"filter must be a mapping, not {_type_name(value)}")
    unknown = [str(key) for key in value if key not in FILTER_KEYS]
    if unknown:
        raise ValueError(
            f"filter has no key {', '.join(map(repr, unknown))}; keys are {', '.join(FILTER_KEYS)}"
        )
    found = mpb.MemoryFilter(metadata=_pairs(value.get("metadata"), "filter['metadata']"))
    for name in ("agent", "app"):
        if value.get(name) is not None:
            setattr(found, name, _text(value[name], f"filter[{name!r}]"))
    for name in FILTER_KEYS[3:]:
        if value.get(name) is not None:
            getattr(found, name).CopyFrom(_when(value[name], f"filter[{name!r}]"))
    return found


def update_memory_request(
    user_id: str, memory_id: str | int, changes: object, supersede: bool
) -> mpb.UpdateMemoryRequest:
    """The request that gives the memory ``changes`` (None values clear)."""
    if not isinstance(changes, Mapping) or not changes:
        raise TypeError(
            f"changes must be a non-empty mapping with keys among {', '.join(CHANGE_KEYS)}"
        )
    unknown = [str(key) for key in changes if key not in CHANGE_KEYS]
    if unknown:
        raise ValueError(
            f"changes has no key {', '.join(map(repr, unknown))}; keys are {', '.join(CHANGE_KEYS)}"
        )
    memory = mpb.Memory(
        content=_text(changes.get("content") or "", "changes['content']"),
        scope=_scope(changes.get("scope"), "changes['scope']"),
        metadata=_pairs(changes.get("metadata"), "changes['metadata']"),
    )
    for name in _TIMES:
        if changes.get(name) is not None:
            getattr(memory, name).CopyFrom(_when(changes[name], f"changes[{name!r}]"))
    return mpb.UpdateMemoryRequest(
        user_id=_ident(user_id, "user_id"),
        memory_id=_ident(memory_id, "memory_id"),
        memory=memory,
        update_mask=FieldMask(paths=list(changes)),
        supersede=bool(supersede),
    )


def list_history_request(
    user_id: str, memory_id: str | int, page_size: int, page_token: str
) -> mpb.ListMemoryHistoryRequest:
    return mpb.ListMemoryHistoryRequest(
        user_id=_ident(user_id, "user_id"),
        memory_id=_ident(memory_id, "memory_id"),
        page_size=_int(page_size, "page_size"),
        page_token=page_token,
    )


def change_from_pb(change: mpb.MemoryChange) -> MemoryChange:
    return {
        "id": change.id,
        "memory_id": change.memory_id,
        "action": change.action,
        "old_content": change.old_content,
        "new_content": change.new_content,
        "replaced_memory_id": change.replaced_memory_id,
        "method": change.method,
        "source_session_id": change.source_session_id,
        "source_message_id": change.source_message_id,
        "change_time": _time(change, "change_time"),
    }

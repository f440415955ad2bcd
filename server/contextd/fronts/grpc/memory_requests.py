"""MemoryService's requests read into the domain's terms, and memory history rows as
messages (records.py has the memories themselves)."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp

from contextd.app.memories import MemoryFilterRequest, edited_fields
from contextd.app.records import MemoryChange, MemoryDetails, MemoryEdit
from contextd.core.errors import Violations
from contextd.fronts.grpc.convert import PublicIds
from contextd.fronts.grpc.records import timestamp
from contextd.v1 import memory_pb2 as mpb

# What google.protobuf.Timestamp may hold: 0001-01-01 to 9999-12-31 (UTC).
_MIN_SECONDS = -62_135_596_800
_MAX_SECONDS = 253_402_300_799


def _seconds(ts: Timestamp, field: str, v: Violations) -> float:
    if not (_MIN_SECONDS <= ts.seconds <= _MAX_SECONDS and 0 <= ts.nanos < 1_000_000_000):
        v.add(field, "not a valid timestamp (0001-01-01 to 9999-12-31)")
        return 0.0
    return ts.seconds + ts.nanos / 1e9


def _time(message: object, name: str, prefix: str, v: Violations) -> float | None:
    """The message's Timestamp field ``name`` in epoch seconds; None when unset."""
    if not message.HasField(name):  # type: ignore[attr-defined]
        return None
    return _seconds(getattr(message, name), prefix + name, v)


def details_from_pb(
    scope: mpb.MemoryScope,
    metadata: dict[str, str],
    times: mpb.AddMemoryRequest | mpb.Memory,
    prefix: str,
    v: Violations,
) -> MemoryDetails:
    return MemoryDetails(
        agent=scope.agent,
        app=scope.app,
        metadata=metadata,
        valid_from=_time(times, "valid_from", prefix, v),
        valid_to=_time(times, "valid_to", prefix, v),
        expires_at=_time(times, "expire_time", prefix, v),
    )


def add_details(request: mpb.AddMemoryRequest) -> MemoryDetails:
    v = Violations()
    details = details_from_pb(request.scope, dict(request.metadata), request, "", v)
    v.raise_if_any()
    return details


def filter_from_pb(f: mpb.MemoryFilter, field: str = "filter") -> MemoryFilterRequest:
    v = Violations()
    prefix = field + "."
    found = MemoryFilterRequest(
        agent=f.agent if f.HasField("agent") else None,
        app=f.app if f.HasField("app") else None,
        metadata=dict(f.metadata),
        created_after=_time(f, "created_after", prefix, v),
        created_before=_time(f, "created_before", prefix, v),
        updated_after=_time(f, "updated_after", prefix, v),
        updated_before=_time(f, "updated_before", prefix, v),
        as_of=_time(f, "as_of", prefix, v),
    )
    v.raise_if_any()
    return found


def edit_from_pb(request: mpb.UpdateMemoryRequest) -> MemoryEdit:
    changes = edited_fields(list(request.update_mask.paths))
    m = request.memory
    v = Violations()
    details = details_from_pb(m.scope, dict(m.metadata), m, "memory.", v)
    v.raise_if_any()
    return MemoryEdit(changes, m.content, details, request.supersede)


def change_to_pb(c: MemoryChange, ids: PublicIds) -> mpb.MemoryChange:
    return mpb.MemoryChange(
        id=ids.memory_change(c.id),
        memory_id=ids.memory(c.memory_id),
        action=c.action,
        old_content=c.old_content,
        new_content=c.new_content,
        replaced_memory_id=ids.memory(c.replaced_memory_id) if c.replaced_memory_id else "",
        method=c.method,
        source_session_id=c.source_session_id,
        source_message_id=ids.message(c.source_message_id) if c.source_message_id else "",
        change_time=timestamp(c.changed_at),
    )

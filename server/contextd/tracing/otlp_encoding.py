"""Finished spans as the bytes of an OTLP ``ExportTraceServiceRequest``, written directly
in protobuf's wire format.

The OTLP exporters' own encoder builds a protobuf object per span, per attribute and per
value, and hashes the resource (a JSON dump of its attributes) once per span; on the
batch thread that is most of what a span costs, and it holds the GIL the event loop
needs. Here the parts that repeat from span to span (the resource and scope, span names,
attributes whose value is a plain scalar) are encoded once and reused, and the rest is a
few byte strings joined per span. The message is the same: decoding these bytes gives
what the exporters' encoder gives (a test compares them).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status

from contextd.tracing.lean import FinishedSpan

# Span flags: whether the parent is remote is known (0x100), and it is (0x200).
_FLAGS_LOCAL = struct.pack("<BBI", 0x85, 0x01, 0x100)  # field 16, fixed32
_FLAGS_REMOTE = struct.pack("<BBI", 0x85, 0x01, 0x300)
_LINK_FLAGS_LOCAL = struct.pack("<BI", 0x35, 0x100)  # field 6, fixed32
_LINK_FLAGS_REMOTE = struct.pack("<BI", 0x35, 0x300)
_TIMES = struct.Struct("<BQBQ").pack  # start (field 7) and end (field 8), fixed64
_DOUBLE = struct.Struct("<d").pack
_EVENT_TIME = struct.Struct("<BQ").pack  # an event's time (field 1), fixed64
_SCALARS = (str, int, float, bool)
# Each kind's field 6; the proto's kinds start at 1.
_KINDS = {kind: b"\x30" + bytes((kind.value + 1,)) for kind in SpanKind}
_MAX_CACHED = 4096  # reused encodings (names, attributes) kept before starting afresh


def _varint(n: int) -> bytes:
    if 0 <= n < 0x80:
        return bytes((n,))
    n &= 0xFFFFFFFFFFFFFFFF  # a negative int64 is its ten-byte two's complement
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field (``tag`` is its key byte: number << 3 | 2)."""
    return bytes((tag,)) + _varint(len(payload)) + payload


def _text(tag: int, text: str) -> bytes:
    return _field(tag, text.encode("utf-8", "surrogatepass"))


def _any_value(value: Any) -> bytes:
    """An AnyValue's fields, in the order the exporters' encoder tests the types."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return _text(0x0A, value)
    if isinstance(value, int):
        return b"\x18" + _varint(value)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE(value)
    if isinstance(value, bytes):
        return _field(0x3A, value)
    if isinstance(value, Sequence):
        return _field(0x2A, b"".join(_field(0x0A, _any_value(v)) for v in value))
    if isinstance(value, Mapping):
        pairs = b"".join(_field(0x0A, _key_value(str(k), v)) for k, v in value.items())
        return _field(0x32, pairs)
    raise TypeError(f"an attribute value of type {type(value).__name__}")


def _key_value(key: str, value: Any) -> bytes:
    return _text(0x0A, key) + _field(0x12, _any_value(value))


class _Reused:
    """Encodings reused from span to span: span names, and attributes whose value is a
    scalar (the same method, model or status code comes back with every call)."""

    __slots__ = ("attributes", "names")

    def __init__(self) -> None:
        self.names: dict[str, bytes] = {}
        # Keyed by the value's type too: True, 1 and 1.0 are equal keys but not values.
        self.attributes: dict[tuple[str, type, Any], bytes] = {}

    def name(self, name: str) -> bytes:
        found = self.names.get(name)
        if found is None:
            if len(self.names) >= _MAX_CACHED:
                self.names.clear()
            found = self.names[name] = _text(0x2A, name)
        return found

    def attributes_of(self, tag: int, attributes: Mapping[str, Any] | None) -> bytes:
        """Each attribute as a repeated KeyValue field ``tag``."""
        if not attributes:
            return b""
        cache = self.attributes
        parts = []
        for key, value in attributes.items():
            if value.__class__ in _SCALARS:
                cached_as = (key, value.__class__, value)
                found = cache.get(cached_as)
                if found is None:
                    if len(cache) >= _MAX_CACHED:
                        cache.clear()
                    found = cache[cached_as] = _field(tag, _key_value(key, value))
                parts.append(found)
            else:
                parts.append(_field(tag, _key_value(key, value)))
        return b"".join(parts)


class SpanEncoder:
    """Encodes batches of finished spans; one per exporter (its caches are not shared
    between threads)."""

    def __init__(self) -> None:
        self._reused = _Reused()
        # Per resource and scope (by identity: one of each for the process' life), the
        # encoded Resource and InstrumentationScope fields, and the objects themselves
        # so that their ids stay theirs.
        self._resources: dict[int, tuple[Resource, bytes]] = {}
        self._scopes: dict[int, tuple[InstrumentationScope | None, bytes]] = {}

    def encode(self, spans: Sequence[ReadableSpan]) -> bytes:
        """The ExportTraceServiceRequest of ``spans``, grouped by resource, then scope."""
        # By identity: the same objects come back in every span of a provider and tracer.
        resources: dict[int, tuple[Resource, dict[int, tuple[Any, list[bytes]]]]] = {}
        span_bytes = self._span
        for span in spans:
            resource, scope = span.resource, span.instrumentation_scope
            scopes = resources.get(id(resource))
            if scopes is None:
                scopes = resources[id(resource)] = (resource, {})
            found = scopes[1].get(id(scope))
            if found is None:
                found = scopes[1][id(scope)] = (scope, [])
            found[1].append(_field(0x12, span_bytes(span)))  # ScopeSpans.spans
        out = []
        for resource, scopes_of in resources.values():
            resource_spans = [self._resource(resource)]
            for scope, encoded in scopes_of.values():
                scope_spans = self._scope(scope) + b"".join(encoded)
                if scope is not None and scope.schema_url:
                    scope_spans += _text(0x1A, scope.schema_url)
                resource_spans.append(_field(0x12, scope_spans))  # ResourceSpans.scope_spans
            if resource.schema_url:
                resource_spans.append(_text(0x1A, resource.schema_url))
            out.append(_field(0x0A, b"".join(resource_spans)))  # the request's resource_spans
        return b"".join(out)

    def _resource(self, resource: Resource) -> bytes:
        found = self._resources.get(id(resource))
        if found is None or found[0] is not resource:
            encoded = _field(0x0A, _Reused().attributes_of(0x0A, resource.attributes))
            found = self._resources[id(resource)] = (resource, encoded)
        return found[1]

    def _scope(self, scope: InstrumentationScope | None) -> bytes:
        found = self._scopes.get(id(scope))
        if found is None or found[0] is not scope:
            fields = b""
            if scope is not None:
                fields = (
                    (_text(0x0A, scope.name) if scope.name else b"")
                    + (_text(0x12, scope.version) if scope.version else b"")
                    + _Reused().attributes_of(0x1A, scope.attributes)
                )
            found = self._scopes[id(scope)] = (scope, _field(0x0A, fields))
        return found[1]

    def _span(self, span: ReadableSpan) -> bytes:
        if span.__class__ is FinishedSpan:  # contextd's own: plain fields, nothing dropped
            lean = span.lean
            return self._fields(
                lean.context, lean.parent, lean.name, lean.kind, lean.start_time,
                span.finished_at, lean.attributes, lean.events, (), lean.status, None,
            )  # fmt: skip
        context = span.context
        assert context is not None  # a span the SDK made always has one
        dropped = (span.dropped_attributes, span.dropped_events, span.dropped_links)
        return self._fields(
            context, span.parent, span.name, span.kind, span.start_time or 0,
            span.end_time or 0, span.attributes, span.events, span.links, span.status,
            dropped if any(dropped) else None,
        )  # fmt: skip

    def _fields(
        self,
        context: SpanContext,
        parent: SpanContext | None,
        name: str,
        kind: SpanKind,
        start_time: int,
        end_time: int,
        attributes: Mapping[str, Any] | None,
        events: Sequence[Event],
        links: Sequence[Link],
        status: Status,
        dropped: tuple[int, int, int] | None,
    ) -> bytes:
        """A Span message's fields, in the order of their numbers."""
        reused = self._reused
        parts = [
            b"\x0a\x10" + context.trace_id.to_bytes(16, "big")
            + b"\x12\x08" + context.span_id.to_bytes(8, "big")
        ]  # fmt: skip
        if context.trace_state:
            parts.append(_text(0x1A, _trace_state(context)))
        if parent is not None:
            parts.append(b"\x22\x08" + parent.span_id.to_bytes(8, "big"))
        parts.append(reused.name(name))
        parts.append(_KINDS[kind])
        parts.append(_TIMES(0x39, start_time, 0x41, end_time))
        parts.append(reused.attributes_of(0x4A, attributes))
        if dropped and dropped[0]:
            parts.append(b"\x50" + _varint(dropped[0]))
        for event in events:
            fields = _EVENT_TIME(0x09, event.timestamp) + _text(0x12, event.name)
            fields += reused.attributes_of(0x1A, event.attributes)
            if event.dropped_attributes:
                fields += b"\x20" + _varint(event.dropped_attributes)
            parts.append(_field(0x5A, fields))
        if dropped and dropped[1]:
            parts.append(b"\x60" + _varint(dropped[1]))
        for link in links:
            linked = link.context
            fields = b"\x0a\x10" + linked.trace_id.to_bytes(16, "big")
            fields += b"\x12\x08" + linked.span_id.to_bytes(8, "big")
            fields += reused.attributes_of(0x22, link.attributes)
            if link.dropped_attributes:
                fields += b"\x28" + _varint(link.dropped_attributes)
            fields += _LINK_FLAGS_REMOTE if linked.is_remote else _LINK_FLAGS_LOCAL
            parts.append(_field(0x6A, fields))
        if dropped and dropped[2]:
            parts.append(b"\x70" + _varint(dropped[2]))
        # The status is always present, as the exporters' encoder writes it.
        code = status.status_code.value
        if code or status.description:
            fields = _text(0x12, status.description) if status.description else b""
            parts.append(_field(0x7A, fields + (b"\x18" + _varint(code) if code else b"")))
        else:
            parts.append(b"\x7a\x00")
        parts.append(_FLAGS_REMOTE if parent is not None and parent.is_remote else _FLAGS_LOCAL)
        return b"".join(parts)


def _trace_state(context: SpanContext) -> str:
    return ",".join(f"{key}={value}" for key, value in context.trace_state.items())

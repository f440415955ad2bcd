"""The server span of one RPC (kind SERVER, named ``contextd.v1.Service/Method``, with
the RPC conventions' attributes), a child of the caller's trace when the call's metadata
brings one.

Our own, not opentelemetry-instrumentation-grpc's aio interceptor: the guard interceptor
already wraps every handler (a second interceptor would add a generator layer to every
streamed message), and the span must also cover what the guard does before the servicer
(authentication, limits) and end with the status code the guard settles on.
"""

from __future__ import annotations

from typing import Any

import grpc
from opentelemetry import trace
from opentelemetry.propagate import get_global_textmap
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from contextd.tracing import spans


class RpcTrace:
    """What tracing does for the calls of one method, worked out once per method name."""

    __slots__ = ("attributes", "name")

    def __init__(self, method: str) -> None:
        self.name = method.lstrip("/")
        service, _, name = self.name.partition("/")
        self.attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}

    def begin(self, metadata: Any) -> Span | None:
        """Make the call's trace current for the rest of its task: its span, or without
        tracing the caller's trace alone (so that its log lines carry the caller's trace
        id). Returns the span, None without tracing."""
        parent = _incoming(metadata)
        span = spans.start(self.name, parent, SpanKind.SERVER, self.attributes)
        if span is None:
            if parent is not None:
                spans.adopt(parent)
            return None
        spans.adopt(trace.set_span_in_context(span, parent))
        return span


def end(span: Span, code: grpc.StatusCode) -> None:
    """End the call's span with its status code; a failed call (any code but OK and
    CANCELLED, a client's own choice) is an error."""
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code not in (grpc.StatusCode.OK, grpc.StatusCode.CANCELLED):
        span.set_status(Status(StatusCode.ERROR, code.name))
        span.set_attribute("error.type", code.name)
    span.end()


def _incoming(metadata: Any) -> Any:
    """The caller's trace context from the metadata keys the propagators read
    (``traceparent`` and ``tracestate`` by default, ``OTEL_PROPAGATORS`` otherwise);
    None when the call brought none."""
    fields = _fields_read()
    carrier = {key: value for key, value in metadata or () if key in fields}
    return spans.incoming(carrier) if carrier else None


# The global propagator and the keys it reads: a composite propagator builds that set
# anew each time it is asked, on every call, so it is kept until the propagator changes.
_read_by: list[Any] = [None, frozenset()]


def _fields_read() -> frozenset[str]:
    textmap = get_global_textmap()
    if textmap is not _read_by[0]:
        _read_by[:] = [textmap, frozenset(textmap.fields)]
    fields: frozenset[str] = _read_by[1]
    return fields

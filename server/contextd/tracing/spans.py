"""The server's tracer, or None when tracing is off, and the spans every layer starts.

A module-level tracer, not the API's global one: a test installs a provider of its own
(with an in-memory exporter) for each server it starts, which the API's set-once global
would not allow. Spans are made current with the API's context, so the log lines
written inside one carry its ids (``contextd.root.logs``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from types import TracebackType

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract
from opentelemetry.sdk import trace as sdk_trace
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from contextd import __version__
from contextd.tracing.lean import LeanTracer

_tracer: Tracer | None = None
# The hot paths' spans (a call's server span, ``span``): the SDK's provider without its
# span object (``lean``); the API's tracer for a provider of another kind.
_lean: LeanTracer | None = None

# Reused, never entered state: a span site without tracing costs this one object.
_NO_SPAN: contextlib.nullcontext[None] = contextlib.nullcontext()


def install(provider: trace.TracerProvider | None) -> None:
    """Send the spans of every layer to ``provider`` from now on; None turns them off."""
    global _tracer, _lean
    _tracer = None if provider is None else provider.get_tracer("contextd", __version__)
    _lean = None
    if isinstance(_tracer, sdk_trace.Tracer):
        _lean = LeanTracer(_tracer, InstrumentationScope("contextd", __version__))


def start(
    name: str,
    parent: otel_context.Context | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> Span | None:
    """A started span, child of the span current in ``parent`` (None: in the current
    context), not made current; None when tracing is off."""
    if _lean is not None:
        return _lean.start(name, parent, kind, attributes)
    if _tracer is None:
        return None
    return _tracer.start_span(name, context=parent, kind=kind, attributes=attributes)


def tracer() -> Tracer | None:
    """The tracer, or None when tracing is off."""
    return _tracer


def span(
    name: str,
    attributes: Mapping[str, AttributeValue] | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
) -> contextlib.AbstractContextManager[Span | None]:
    """A child of the current span, current while the block runs; an exception leaving
    the block marks it failed. Without tracing, or within a call that is not sampled, a
    context manager doing nothing (None)."""
    if _tracer is None:
        return _NO_SPAN
    parent = trace.get_current_span().get_span_context()
    follows = _lean is not None and _lean.follows_parent
    if follows and parent.is_valid and not parent.trace_flags.sampled:
        return _NO_SPAN  # its parent was not sampled: it would not be either
    started = start(name, None, kind, attributes)
    assert started is not None
    return _Current(started)


class _Current:
    """Makes a started span current for a block and ends it after. What the SDK's
    ``start_as_current_span`` does (an exception is recorded as an event and sets the
    error status), as one object rather than two generator-based context managers."""

    __slots__ = ("span", "token")

    def __init__(self, span: Span) -> None:
        self.span = span

    def __enter__(self) -> Span:
        self.token = otel_context.attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        otel_context.detach(self.token)
        # Exception only: GeneratorExit, a cancellation, are how work is called off.
        if isinstance(error, Exception) and self.span.is_recording():
            self.span.record_exception(error)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        self.span.end()


def incoming(carrier: Mapping[str, str]) -> otel_context.Context | None:
    """The caller's trace context in ``carrier`` (headers or metadata), as the global
    propagators read it; None when it holds no valid one."""
    found = extract(carrier)
    return found if trace.get_current_span(found).get_span_context().is_valid else None


def adopt(parent: otel_context.Context) -> None:
    """Make the caller's trace current for the rest of the call's task, without a span of
    ours (tracing off): the call's log lines still carry the caller's trace id. Never
    detached: each call runs in a task of its own, whose context ends with it."""
    otel_context.attach(parent)


def fail(span: Span, error_type: str, description: str = "") -> None:
    """Mark ``span`` failed with ``error_type`` (the conventions' ``error.type``)."""
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description or None))


@contextlib.contextmanager
def linked_root(name: str, attributes: Mapping[str, AttributeValue]) -> Iterator[Span | None]:
    """A span of a trace of its own, linked to the span current now: for work the current
    span's call does not wait for (after-turn work outlives its turn's call)."""
    if _tracer is None:
        yield None
        return
    cause = trace.get_current_span().get_span_context()
    links = [Link(cause)] if cause.is_valid else []
    with _tracer.start_as_current_span(
        name, context=otel_context.Context(), attributes=attributes, links=links
    ) as root:
        yield root

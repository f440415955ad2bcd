"""contextd's own spans on the hot paths (a call's server span, ``spans.span``), made
with the SDK's parts but without the SDK's span object.

The SDK's ``Tracer.start_span`` and ``Span.end`` cost about as much as a small call's
whole build: the span holds a lock and a bounded, validated attribute container, and
its end copies everything into a second object for the processors. Here the sampler,
the id generator, the resource and the span processors are still the provider's, and
the processors still receive the SDK's ``ReadableSpan``; in between, the live span is a
plain object. The sampler decides before any of it exists: an unsampled call gets the
API's non-recording span (its ids still tie log lines together) and nothing else.

What it leaves out, safe for contextd's own spans only: attribute values are not
validated or counted against limits (every value contextd sets is a string, number,
boolean or a tuple of them), and the processors' ``on_start`` is not called (the batch
and simple processors do nothing there).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk import trace as sdk_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, ParentBasedTraceIdRatio
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import Attributes, AttributeValue

_SAMPLED = TraceFlags.SAMPLED
_RANDOM = TraceFlags.RANDOM_TRACE_ID
_UNSET = Status(StatusCode.UNSET)
_FOLLOWS_PARENT = (
    ",remoteParentSampled:AlwaysOnSampler,remoteParentNotSampled:AlwaysOffSampler,"
    "localParentSampled:AlwaysOnSampler,localParentNotSampled:AlwaysOffSampler}"
)
_ALWAYS_ON_ROOT = "ParentBased{root:AlwaysOnSampler,"


class LeanTracer:
    """Starts spans for the provider of ``tracer`` (an SDK tracer)."""

    __slots__ = (
        "_always_on_root",
        "_ids",
        "_processor",
        "_random",
        "_resource",
        "_sampler",
        "_scope",
        "follows_parent",
    )

    def __init__(self, tracer: sdk_trace.Tracer, scope: InstrumentationScope) -> None:
        self._sampler = sampler = tracer.sampler
        # The SDK's parent-based samplers as the environment makes them: a child of a
        # span takes its decision (and trace state) from it, so that is decided here
        # without the sampler's calls; and whether a new trace is always sampled.
        described = sampler.get_description()
        self.follows_parent = type(sampler) in (ParentBased, ParentBasedTraceIdRatio) and (
            described.endswith(_FOLLOWS_PARENT)
        )
        self._always_on_root = self.follows_parent and described.startswith(_ALWAYS_ON_ROOT)
        self._ids = tracer.id_generator
        # A new trace's flags say whether its id is random, as the SDK's tracer does.
        self._random = _RANDOM if tracer.id_generator.is_trace_id_random() else 0
        self._resource = tracer.resource
        self._processor = tracer.span_processor
        self._scope = scope

    def start(
        self,
        name: str,
        parent: otel_context.Context | None,
        kind: SpanKind,
        attributes: Mapping[str, AttributeValue] | None,
    ) -> trace.Span:
        """A started span, child of the span current in ``parent`` (None: the current
        context); the sampler's decision is taken first."""
        found = trace.get_current_span(parent).get_span_context()
        parent_span = found if found.is_valid else None
        if parent_span is not None:
            trace_id = parent_span.trace_id
            flags = parent_span.trace_flags & _RANDOM
        else:
            trace_id = self._ids.generate_trace_id()
            flags = self._random
        if parent_span is not None and self.follows_parent:
            sampled = recorded = parent_span.trace_flags.sampled
            trace_state = parent_span.trace_state
        elif parent_span is None and self._always_on_root:
            sampled = recorded = True
            trace_state = None
        else:
            decision = self._sampler.should_sample(parent, trace_id, name, kind, attributes)
            sampled = decision.decision is Decision.RECORD_AND_SAMPLE
            recorded = decision.decision is not Decision.DROP  # RECORD_ONLY: not exported
            trace_state, attributes = decision.trace_state, decision.attributes
        if sampled:
            flags |= _SAMPLED
        context = SpanContext(
            trace_id,
            self._ids.generate_span_id(),
            is_remote=False,
            trace_flags=TraceFlags(flags),
            trace_state=trace_state,
        )
        if not recorded:
            return trace.NonRecordingSpan(context)
        return LeanSpan(self, name, context, parent_span, kind, dict(attributes or {}))

    def ended(self, span: LeanSpan, end_time: int) -> None:
        self._processor.on_end(FinishedSpan(span, end_time, self._resource, self._scope))


class FinishedSpan(sdk_trace.ReadableSpan):
    """What the processors receive: the SDK's ``ReadableSpan``, which also keeps the
    ended span, whose plain fields the OTLP encoder reads directly."""

    def __init__(
        self, span: LeanSpan, end_time: int, resource: Resource, scope: InstrumentationScope
    ) -> None:
        super().__init__(
            name=span.name,
            context=span.context,
            parent=span.parent,
            resource=resource,
            attributes=MappingProxyType(span.attributes),
            events=tuple(span.events),
            links=(),
            kind=span.kind,
            status=span.status,
            start_time=span.start_time,
            end_time=end_time,
            instrumentation_scope=scope,
        )
        self.lean = span
        self.finished_at = end_time


@dataclass(slots=True, eq=False)  # a span is itself, whatever it holds
class LeanSpan(trace.Span):
    """A recording span until it ends; then the processors get its ``ReadableSpan``."""

    tracer: LeanTracer
    name: str
    context: SpanContext
    parent: SpanContext | None
    kind: SpanKind
    attributes: dict[str, AttributeValue]
    events: list[sdk_trace.Event] = field(default_factory=list, init=False)
    status: Status = field(default=_UNSET, init=False)
    start_time: int = field(default_factory=time.time_ns, init=False)
    ended: bool = field(default=False, init=False)

    def get_span_context(self) -> SpanContext:
        return self.context

    def is_recording(self) -> bool:
        return not self.ended

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        if not self.ended:
            self.attributes[key] = value

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        if not self.ended:
            self.attributes.update(attributes)

    def add_event(
        self, name: str, attributes: Attributes = None, timestamp: int | None = None
    ) -> None:
        if not self.ended:
            self.events.append(sdk_trace.Event(name, attributes, timestamp))

    def add_link(self, context: SpanContext, attributes: Attributes = None) -> None:
        """Links are given when a span starts (``spans.linked_root``); none is added later."""

    def update_name(self, name: str) -> None:
        if not self.ended:
            self.name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """As the SDK's span: an OK status is final, UNSET never replaces another."""
        if self.ended or self.status.status_code is StatusCode.OK:
            return
        if isinstance(status, StatusCode):
            status = Status(status, description)
        if status.status_code is not StatusCode.UNSET:
            self.status = status

    def record_exception(
        self,
        exception: BaseException,
        attributes: Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        kind = type(exception)
        module = kind.__module__
        event: dict[str, AttributeValue] = {
            "exception.type": (
                f"{module}.{kind.__qualname__}" if module != "builtins" else kind.__qualname__
            ),
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": str(escaped),
        }
        event.update(attributes or {})
        self.add_event("exception", event, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self.ended:
            return
        self.ended = True
        self.tracer.ended(self, end_time or time.time_ns())

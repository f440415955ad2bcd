"""contextd's own spans (``spans.start``, ``spans.span``, the server span) as the
processors receive them: what the SDK's spans would carry, the sampler's decision
honoured (an unsampled call makes no child spans at all), an exception recorded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from contextd.tracing import spans
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    ParentBasedTraceIdRatio,
    Sampler,
)
from opentelemetry.trace import SpanKind, StatusCode


def _install(sampler: Sampler) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler, resource=Resource.create({"service.name": "t"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans.install(provider)
    return exporter


@pytest.fixture(autouse=True)
def _uninstall() -> Iterator[None]:
    yield
    spans.install(None)


def _call(name: str = "svc/Method") -> None:
    """A server span with a child, as a call makes them."""
    server = spans.start(name, None, SpanKind.SERVER, {"rpc.system": "grpc"})
    assert server is not None
    token = otel_context.attach(trace.set_span_in_context(server))
    try:
        with spans.span("child", {"n": 1}) as child:
            if child is not None:
                child.set_attribute("hits", 2)
    finally:
        otel_context.detach(token)
    server.set_attribute("rpc.grpc.status_code", 0)
    server.end()


def test_a_sampled_call_has_its_spans_as_the_sdk_would_make_them() -> None:
    exporter = _install(ParentBased(ALWAYS_ON))
    _call()
    child, server = exporter.get_finished_spans()
    assert server.name == "svc/Method" and server.kind is SpanKind.SERVER
    assert server.parent is None
    assert dict(server.attributes or {}) == {"rpc.system": "grpc", "rpc.grpc.status_code": 0}
    assert server.resource.attributes["service.name"] == "t"
    assert server.instrumentation_scope is not None
    assert server.instrumentation_scope.name == "contextd"
    assert server.context is not None and server.context.trace_flags.sampled
    assert child.parent is not None and child.parent.span_id == server.context.span_id
    assert child.context is not None and child.context.trace_id == server.context.trace_id
    assert dict(child.attributes or {}) == {"n": 1, "hits": 2}
    assert child.start_time is not None and server.start_time is not None
    assert server.start_time <= child.start_time
    assert child.end_time is not None and server.end_time is not None
    assert child.end_time <= server.end_time


def test_an_unsampled_call_makes_no_child_and_exports_nothing() -> None:
    exporter = _install(ParentBased(ALWAYS_OFF))
    server = spans.start("svc/Method", None, SpanKind.SERVER, {"rpc.system": "grpc"})
    assert server is not None and not server.is_recording()
    assert server.get_span_context().is_valid, "its ids still tie the call's log lines"
    token = otel_context.attach(trace.set_span_in_context(server))
    try:
        with spans.span("child") as child:
            assert child is None
    finally:
        otel_context.detach(token)
    server.end()
    assert not exporter.get_finished_spans()


def test_a_sampler_that_ignores_the_parent_still_decides_for_each_child() -> None:
    exporter = _install(ALWAYS_ON)
    caller = trace.NonRecordingSpan(
        trace.SpanContext(1, 2, is_remote=True, trace_flags=trace.TraceFlags(0))
    )
    with trace.use_span(caller), spans.span("child") as child:
        assert child is not None and child.is_recording()
    [found] = exporter.get_finished_spans()
    assert found.parent is not None and found.parent.span_id == 2


@pytest.mark.parametrize("ratio", [0.0, 1.0])
def test_a_ratio_decides_for_a_new_trace_and_its_children_follow(ratio: float) -> None:
    exporter = _install(ParentBasedTraceIdRatio(ratio))
    _call()
    assert len(exporter.get_finished_spans()) == (2 if ratio else 0)


def test_a_parent_based_sampler_of_other_delegates_is_asked_for_each_child() -> None:
    exporter = _install(ParentBased(ALWAYS_OFF, local_parent_not_sampled=ALWAYS_ON))
    _call()
    [child] = exporter.get_finished_spans()
    assert child.name == "child" and child.context is not None
    assert child.context.trace_flags.sampled


def test_an_exception_leaving_a_span_marks_it_failed() -> None:
    exporter = _install(ParentBased(ALWAYS_ON))
    with pytest.raises(ValueError), spans.span("work"):
        raise ValueError("bad")
    [span] = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ValueError: bad"
    [event] = span.events
    assert event.name == "exception"
    assert dict(event.attributes or {})["exception.type"] == "ValueError"
    assert dict(event.attributes or {})["exception.message"] == "bad"


def test_a_span_ends_once_and_is_read_only_after() -> None:
    exporter = _install(ParentBased(ALWAYS_ON))
    span = spans.start("once")
    assert span is not None
    span.end()
    span.set_attribute("late", 1)
    span.end()
    [found] = exporter.get_finished_spans()
    assert "late" not in dict(found.attributes or {})

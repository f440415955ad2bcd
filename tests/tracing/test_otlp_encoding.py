"""Spans encoded by contextd's OTLP encoder decode to the very message the OTLP
exporters' own encoder builds: every field of spans, events, links, status, resource and
scope, for every kind of attribute value, in batches that mix resources and scopes; the
gRPC exporter sends that message to a real OTLP/gRPC receiver (the HTTP one is
test_otlp_export's)."""

from __future__ import annotations

from concurrent import futures

import grpc
import pytest
from contextd.tracing import spans
from contextd.tracing.exporters import GrpcSpanExporter
from contextd.tracing.lean import FinishedSpan
from contextd.tracing.otlp_encoding import SpanEncoder
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import AttributeValue

REMOTE = SpanContext(
    0x4BF92F3577B34DA6A3CE929D0E0E4736,
    0x00F067AA0BA902B7,
    is_remote=True,
    trace_flags=TraceFlags(TraceFlags.SAMPLED),
    trace_state=TraceState([("vendor", "1"), ("other", "x")]),
)
VALUES: dict[str, AttributeValue] = {
    "s": "grpc",
    "unicode": "café ☕",
    "true": True,
    "one": 1,
    "one.float": 1.0,
    "negative": -5,
    "big": 2**62,
    "half": 0.5,
    "strings": ("a", "b"),
    "ints": (1, 2, 3),
    "bools": (True, False),
    "empty": "",
}


def _spans() -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    providers = [
        TracerProvider(resource=Resource.create({"service.name": "contextd", "n": 3})),
        TracerProvider(resource=Resource.create({"service.name": "other"})),
    ]
    for provider in providers:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = providers[0].get_tracer("contextd", "1.2.3")
    for n in range(3):
        caller = trace.set_span_in_context(trace.NonRecordingSpan(REMOTE)) if n == 0 else None
        server = tracer.start_span("svc/Method", caller, SpanKind.SERVER, {"rpc.system": "grpc"})
        with trace.use_span(server):
            tracer.start_span("contextd.build_messages").end()
            call = tracer.start_span("chat model", kind=SpanKind.CLIENT, attributes=VALUES)
            call.add_event("happened", {"why": "test", "n": n})
            call.add_event("bare")
            call.set_status(Status(StatusCode.ERROR, "boom"))
            call.end()
        own = trace.set_span_in_context(trace.INVALID_SPAN)
        links = [Link(server.get_span_context(), {"cause": True}), Link(REMOTE)]
        tracer.start_span("after", own, links=links).end()
        server.set_attribute("rpc.grpc.status_code", n)
        server.set_status(Status(StatusCode.OK) if n == 1 else Status(StatusCode.UNSET))
        server.end()
    providers[0].get_tracer("second").start_span("y").end()
    providers[1].get_tracer("another", schema_url="https://example.com/s").start_span("x").end()
    return list(exporter.get_finished_spans())


def test_the_encoding_is_the_exporters_message() -> None:
    spans = _spans()
    encoder = SpanEncoder()
    for _ in range(2):  # the second time from the reused encodings
        ours = ExportTraceServiceRequest.FromString(encoder.encode(spans))
        assert ours == encode_spans(spans)
    assert len(ours.resource_spans) == 2


def test_the_grpc_exporter_sends_the_same_request() -> None:
    spans = _spans()
    exporter = GrpcSpanExporter()
    try:
        assert exporter._translate_data(spans) == encode_spans(spans)
    finally:
        exporter.shutdown()


def test_contextd_own_spans_encode_as_the_sdks_would() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans.install(provider)
    try:
        caller = trace.set_span_in_context(trace.NonRecordingSpan(REMOTE))
        server = spans.start("svc/Method", caller, SpanKind.SERVER, {"rpc.system": "grpc"})
        assert server is not None
        with trace.use_span(server), pytest.raises(ValueError), spans.span("work", VALUES):
            raise ValueError("bad")
        server.set_attribute("rpc.grpc.status_code", 2)
        server.set_status(Status(StatusCode.ERROR, "INTERNAL"))
        server.end()
    finally:
        spans.install(None)
    finished = list(exporter.get_finished_spans())
    assert {type(s) for s in finished} == {FinishedSpan}
    ours = ExportTraceServiceRequest.FromString(SpanEncoder().encode(finished))
    assert ours == encode_spans(finished)


def test_the_grpc_exporter_reaches_an_otlp_grpc_receiver(monkeypatch: pytest.MonkeyPatch) -> None:
    received: list[ExportTraceServiceRequest] = []

    def export(request: ExportTraceServiceRequest, context: object) -> ExportTraceServiceResponse:
        received.append(request)
        return ExportTraceServiceResponse()

    handler = grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {
            "Export": grpc.unary_unary_rpc_method_handler(
                export,
                request_deserializer=ExportTraceServiceRequest.FromString,
                response_serializer=ExportTraceServiceResponse.SerializeToString,
            )
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_INSECURE", "true")
    spans_sent = _spans()
    exporter = GrpcSpanExporter()
    try:
        assert exporter.export(spans_sent) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
        server.stop(0)
    [request] = received
    assert request == encode_spans(spans_sent)

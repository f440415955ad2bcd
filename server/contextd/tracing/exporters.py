"""The OTLP exporters (HTTP and gRPC) with spans encoded by ``otlp_encoding``.

Everything but the encoding is the SDK exporters' own: the endpoint, headers, TLS,
compression, timeout and retries they read from ``OTEL_EXPORTER_OTLP_*``. Only the step
that turns a batch into a request changes, because on the batch thread it is most of a
span's cost and it holds the GIL the event loop needs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as SdkGrpcExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as SdkHttpExporter,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from contextd.tracing.otlp_encoding import SpanEncoder

log = logging.getLogger("contextd.tracing")


class HttpSpanExporter(SdkHttpExporter):
    """OTLP/HTTP (protobuf): the encoded batch goes to the SDK exporter's HTTP client."""

    def __init__(self) -> None:
        super().__init__()
        self._encoder = SpanEncoder()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        with self._metrics.export_operation(len(spans)) as result:
            try:
                data = self._encoder.encode(spans)
            except Exception as error:  # an attribute the encoder cannot write
                log.error("could not encode %d spans: %s", len(spans), error)
                result.error = error
                return SpanExportResult.FAILURE
            sent = self._client.export(data)
            if not sent.success:
                result.error = sent.error
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS


class GrpcSpanExporter(SdkGrpcExporter):
    """OTLP/gRPC: the request is parsed from the encoded batch (in protobuf's C code,
    a small part of what building it field by field in Python costs)."""

    def __init__(self) -> None:
        super().__init__()
        self._encoder = SpanEncoder()

    def _translate_data(self, data: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
        return ExportTraceServiceRequest.FromString(self._encoder.encode(data))

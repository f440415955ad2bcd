"""A small OTLP/HTTP receiver: decodes each ``POST /v1/traces`` body as the real
protobuf ``ExportTraceServiceRequest`` and keeps its spans with their resources."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span


@dataclass
class Received:
    spans: list[Span] = field(default_factory=list)
    resources: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, Received]]:
    """The receiver's base URL (for ``OTEL_EXPORTER_OTLP_ENDPOINT``) and what it received."""
    received = Received()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            export = ExportTraceServiceRequest.FromString(body)
            received.paths.append(self.path)
            for resource_spans in export.resource_spans:
                received.resources.append(
                    {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                )
                for scope in resource_spans.scope_spans:
                    received.spans.extend(scope.spans)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
            received.arrived.set()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()

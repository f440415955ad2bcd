"""A real server process with ``OTEL_EXPORTER_OTLP_ENDPOINT`` set exports its spans over
OTLP/HTTP to a receiver that decodes the protobuf; without OTEL_* it exports nothing."""

from __future__ import annotations

from pathlib import Path

import grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc

from tests.support.otlp_receiver import otlp_receiver
from tests.support.server import start_server

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _build(address: str) -> None:
    with grpc.insecure_channel(address) as channel:
        stub = context_pb2_grpc.ContextServiceStub(channel)
        request = pb.BuildMessagesRequest(user_message="hi", token_budget=500)
        stub.BuildMessages(request, metadata=(("traceparent", TRACEPARENT),))


def test_spans_reach_an_otlp_receiver(tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, received):
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=test",
        }
        proc = start_server(tmp_path, env=env)
        try:
            _build(proc.address)
        finally:
            assert proc.stop() == 0  # the batch still waiting is exported at shutdown
        assert received.arrived.is_set()
    assert set(received.paths) == {"/v1/traces"}
    names = {span.name for span in received.spans}
    assert {"contextd.v1.ContextService/BuildMessages", "contextd.build_messages"} <= names
    [server] = [s for s in received.spans if s.name.endswith("/BuildMessages")]
    assert server.trace_id.hex() == TRACEPARENT.split("-")[1]
    assert received.resources[0]["service.name"] == "contextd"
    assert received.resources[0]["deployment.environment.name"] == "test"
    [line] = proc.logs("tracing")
    assert line["exporters"] == ["otlp"]


def test_no_otel_variables_no_tracing(tmp_path: Path) -> None:
    with otlp_receiver() as (_, received):
        proc = start_server(tmp_path)
        try:
            _build(proc.address)
            [access] = proc.wait_for_logs("rpc", lambda entry: True)
        finally:
            assert proc.stop() == 0
    assert not received.spans
    assert not proc.logs("tracing")
    # The caller's trace id still ties the call's log lines to its trace; no span of ours.
    assert access["trace_id"] == TRACEPARENT.split("-")[1]
    assert "span_id" not in access

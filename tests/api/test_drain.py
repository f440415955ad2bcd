"""Shutdown with --drain-delay: health turns NOT_SERVING at once while calls are still
served, so that a load balancer moves away; then new calls are refused, and the whole
shutdown stays within --shutdown-grace."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.server import start_server


def test_drain_then_refuse_within_the_grace(tmp_path: Path) -> None:
    proc = start_server(tmp_path, "--drain-delay", "1.5", "--shutdown-grace", "3")
    with grpc.insecure_channel(proc.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        context = context_pb2_grpc.ContextServiceStub(channel)
        count = pb.CountTokensRequest(texts=["a b c d"], tokenizer="estimate")
        assert context.CountTokens(count, timeout=5).total_tokens == 2
        asked = time.monotonic()
        proc.process.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        # Draining: health says go elsewhere, calls are still answered.
        reply = health.Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING
        assert context.CountTokens(count, timeout=5).total_tokens == 2
        assert time.monotonic() - asked < 1.5
        assert proc.process.wait(10) == 0
        stopped = time.monotonic() - asked
    assert 1.5 <= stopped < 3 + 1  # the drain, and not past the grace (+ the exit)
    draining = proc.logs("draining")
    assert draining and draining[0]["drain_s"] == 1.5

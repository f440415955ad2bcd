"""The embedding provider's calls, failures and the memories waiting for a vector, on a
real server's ``GET /metrics``."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import grpc
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import memory_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from tests.support.fake_embeddings import fake_embeddings
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.sdk import free_port
from tests.support.server import start_server


def _values(address: str) -> dict[str, float]:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("contextd_embedding")
    }


def test_embedding_calls_failures_and_pending(tmp_path: Path) -> None:
    with fake_embeddings(key=FAKE_KEY) as fake:
        proc = start_server(
            tmp_path,
            *("--metrics-port", str(free_port())),
            *("--embedding-provider", "openai", "--embedding-base-url", fake.url),
            *("--embedding-model", fake.model),
            env={"OPENAI_API_KEY": FAKE_KEY},
        )
        try:
            [line] = proc.logs("metrics listening")
            address = str(line["address"])
            fake.fail(1, 500)
            with grpc.insecure_channel(proc.address) as channel:
                stub = memory_pb2_grpc.MemoryServiceStub(channel)
                stub.AddMemory(mpb.AddMemoryRequest(user_id="ada", content="I am vegetarian"))
            deadline = time.monotonic() + 10
            # The first call fails; the worker tries again a second later and succeeds.
            while True:
                values = _values(address)
                calls = values["contextd_embedding_calls_total"]
                if calls >= 2 and values["contextd_embedding_pending"] == 0:
                    break
                assert time.monotonic() < deadline, values
                time.sleep(0.1)
            assert values["contextd_embedding_failures_total"] == 1
        finally:
            assert proc.stop() == 0

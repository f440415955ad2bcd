"""A scope's default expiry (``--memory-expiry-days``) on AddMemory, and restating a
memory moving its expiry later only, on SQLite and on PostgreSQL."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import memory_pb2_grpc
from google.protobuf.timestamp_pb2 import Timestamp

from tests.support.pg_databases import database_url_for
from tests.support.server import start_server

pytestmark = pytest.mark.both_backends

Stub = memory_pb2_grpc.MemoryServiceStub
DAY = 86400.0


@pytest.fixture(scope="module")
def memory(
    tmp_path_factory: pytest.TempPathFactory, backend: str, request: pytest.FixtureRequest
) -> Iterator[Stub]:
    proc = start_server(
        tmp_path_factory.mktemp("memory-expiry"),
        *("--memory-expiry-days", "app:word=30, agent:planner=7"),
        database_url=database_url_for(request, backend),
    )
    try:
        with grpc.insecure_channel(proc.address) as channel:
            yield memory_pb2_grpc.MemoryServiceStub(channel)
    finally:
        assert proc.stop() == 0


def at(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def add(stub: Stub, user: str, content: str, **fields: Any) -> mpb.AddMemoryResponse:
    return stub.AddMemory(mpb.AddMemoryRequest(user_id=user, content=content, **fields))  # type: ignore[no-any-return]


def days_left(m: mpb.Memory) -> float | None:
    if not m.HasField("expire_time"):
        return None
    return (m.expire_time.ToNanoseconds() / 1e9 - time.time()) / DAY


def test_a_memory_without_an_expiry_gets_its_scopes_default(memory: Stub) -> None:
    user = f"u-{uuid.uuid4().hex[:10]}"
    word = add(memory, user, "Tables in Word", scope=mpb.MemoryScope(app="word")).memory
    both = add(memory, user, "Plans in Word", scope=mpb.MemoryScope(app="word", agent="planner"))
    excel = add(memory, user, "Charts in Excel", scope=mpb.MemoryScope(app="excel")).memory
    plain = add(memory, user, "Likes tea").memory
    given = add(
        memory, user, "Fonts", scope=mpb.MemoryScope(app="word"), expire_time=at(time.time() + DAY)
    )
    assert days_left(word) == pytest.approx(30, abs=0.01)
    assert days_left(both.memory) == pytest.approx(7, abs=0.01)  # the sooner
    assert days_left(excel) is None and days_left(plain) is None
    assert days_left(given.memory) == pytest.approx(1, abs=0.01)  # the request's own


def test_restating_a_memory_moves_its_expiry_later_never_sooner(memory: Stub) -> None:
    user = f"u-{uuid.uuid4().hex[:10]}"
    first = add(memory, user, "Parking spot 42", expire_time=at(time.time() + 2 * DAY)).memory
    sooner = add(memory, user, "parking spot 42", expire_time=at(time.time() + DAY))
    assert (sooner.created, sooner.memory.id) == (False, first.id)
    assert days_left(sooner.memory) == pytest.approx(2, abs=0.01)
    later = add(memory, user, "Parking spot 42", expire_time=at(time.time() + 3 * DAY))
    assert days_left(later.memory) == pytest.approx(3, abs=0.01)
    kept = add(memory, user, "Likes green tea").memory
    again = add(memory, user, "Likes green tea", expire_time=at(time.time() + DAY)).memory
    assert again.id == kept.id and days_left(again) is None  # kept until deleted
    listed = memory.ListMemories(mpb.ListMemoriesRequest(user_id=user)).memories
    assert {m.content: days_left(m) is None for m in listed} == {
        "Parking spot 42": False,
        "Likes green tea": True,
    }

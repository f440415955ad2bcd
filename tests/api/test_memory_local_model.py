"""A server with --embedding-provider local and the real model: an English paraphrase is
found by meaning, a Chinese question is searched by terms with a note. Skips when the
local-embeddings extra is not installed."""

from __future__ import annotations

import importlib.util
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd.providers.local_embeddings import DEFAULT_LOCAL_MODEL, PACKAGED_MODELS
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import memory_pb2_grpc

from tests.support.server import start_server

pytestmark = pytest.mark.skipif(
    any(
        importlib.util.find_spec(name) is None
        for name in ("sentence_transformers", PACKAGED_MODELS[DEFAULT_LOCAL_MODEL].package)
    ),
    reason="the local-embeddings extra is not installed: it needs torch, "
    "which no package index or wheelhouse here holds",
)


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[memory_pb2_grpc.MemoryServiceStub]:
    proc = start_server(
        Path(tmp_path_factory.mktemp("contextd-data")), "--embedding-provider", "local"
    )
    try:
        with grpc.insecure_channel(proc.address) as channel:
            yield memory_pb2_grpc.MemoryServiceStub(channel)
    finally:
        proc.stop()


def _search(
    stub: memory_pb2_grpc.MemoryServiceStub, uid: str, query: str
) -> mpb.SearchMemoriesResponse:
    return stub.SearchMemories(mpb.SearchMemoriesRequest(user_id=uid, query=query, limit=3))


def test_an_english_paraphrase_is_found_by_meaning(
    stub: memory_pb2_grpc.MemoryServiceStub,
) -> None:
    uid = f"u-{uuid.uuid4().hex[:8]}"
    for text in (
        "I have been vegetarian since 2015.",
        "My car is a blue Volkswagen Golf.",
        "I play bass guitar in a jazz band.",
    ):
        stub.AddMemory(mpb.AddMemoryRequest(user_id=uid, content=text))
    deadline = time.monotonic() + 60  # the model loads in the background first
    while True:
        found = [r.memory.content for r in _search(stub, uid, "Do I eat meat?").results]
        if found or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert found[:1] == ["I have been vegetarian since 2015."]


def test_a_chinese_question_is_searched_by_terms_with_a_note(
    stub: memory_pb2_grpc.MemoryServiceStub,
) -> None:
    uid = f"u-{uuid.uuid4().hex[:8]}"
    stub.AddMemory(mpb.AddMemoryRequest(user_id=uid, content="用户不喜欢吃辣"))
    reply = _search(stub, uid, "用户喜欢吃辣吗")
    assert [r.memory.content for r in reply.results] == ["用户不喜欢吃辣"]
    assert "reads English only" in reply.note

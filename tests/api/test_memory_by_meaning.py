"""A server with --embedding-provider openai against a fake embeddings server: memories
found by meaning through SearchMemories and the memory layer, and what a slow or failing
provider changes (nothing but the ranking, and a note)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

from tests.support.fake_embeddings import FakeEmbeddings, fake_embeddings
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.pg_databases import database_url_for
from tests.support.server import start_server

pytestmark = pytest.mark.both_backends

SYNONYMS = {"vegetarian": "meat", "eat": "meat"}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeEmbeddings]:
    with fake_embeddings(key=FAKE_KEY, synonyms=dict(SYNONYMS)) as server:
        yield server


@pytest.fixture(scope="module")
def channel(
    fake: FakeEmbeddings,
    backend: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[grpc.Channel]:
    proc = start_server(
        Path(tmp_path_factory.mktemp("contextd-data")),
        *("--embedding-provider", "openai", "--embedding-base-url", fake.url),
        *("--embedding-model", fake.model, "--embedding-timeout", "0.5"),
        env={"OPENAI_API_KEY": FAKE_KEY},
        database_url=database_url_for(request, backend),
    )
    try:
        with grpc.insecure_channel(proc.address) as channel:
            yield channel
    finally:
        proc.stop()


def _search(channel: grpc.Channel, uid: str, query: str) -> mpb.SearchMemoriesResponse:
    stub = memory_pb2_grpc.MemoryServiceStub(channel)
    return stub.SearchMemories(mpb.SearchMemoriesRequest(user_id=uid, query=query, limit=5))


def _found_by_meaning(channel: grpc.Channel, uid: str, within: float = 10.0) -> list[str]:
    deadline = time.monotonic() + within
    while True:
        found = [r.memory.content for r in _search(channel, uid, "Do I eat meat?").results]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_add_does_not_wait_and_paraphrase_is_found(
    channel: grpc.Channel, fake: FakeEmbeddings
) -> None:
    uid = f"u-{uuid.uuid4().hex[:8]}"
    stub = memory_pb2_grpc.MemoryServiceStub(channel)
    fake.delay = 2.0
    try:
        started = time.monotonic()
        stub.AddMemory(mpb.AddMemoryRequest(user_id=uid, content="I am vegetarian"))
        stub.AddMemory(mpb.AddMemoryRequest(user_id=uid, content="I live in Lisbon"))
        assert time.monotonic() - started < 1.0
        # Found by its terms before its vector exists.
        by_terms = _search(channel, uid, "vegetarian")
        assert [r.memory.content for r in by_terms.results] == ["I am vegetarian"]
    finally:
        fake.delay = 0.0
    assert _found_by_meaning(channel, uid)[:1] == ["I am vegetarian"]
    texts = fake.texts()
    assert "I am vegetarian" in texts and "Do I eat meat?" in texts
    # Every request had the shape of the API (the fake answers anything else 400).
    assert all(r["body"]["encoding_format"] == "float" for r in fake.requests)


def test_failure_at_search_gives_term_results_and_a_note(
    channel: grpc.Channel, fake: FakeEmbeddings
) -> None:
    uid = f"u-{uuid.uuid4().hex[:8]}"
    stub = memory_pb2_grpc.MemoryServiceStub(channel)
    stub.AddMemory(mpb.AddMemoryRequest(user_id=uid, content="I am vegetarian"))
    assert _found_by_meaning(channel, uid) == ["I am vegetarian"]
    fake.fail(1, 500)
    reply = _search(channel, uid, "vegetarian")
    assert [r.memory.content for r in reply.results] == ["I am vegetarian"]
    assert "ranked by terms only" in reply.note and "500" in reply.note
    # Slow: the same, after --embedding-timeout.
    fake.delay = 1.5
    try:
        reply = _search(channel, uid, "Do I eat meat?")
    finally:
        fake.delay = 0.0
    assert list(reply.results) == [] and "ranked by terms only" in reply.note
    assert _search(channel, uid, "Do I eat meat?").note == ""


def test_memory_layer_by_meaning_and_its_note(channel: grpc.Channel, fake: FakeEmbeddings) -> None:
    uid = f"u-{uuid.uuid4().hex[:8]}"
    memory_pb2_grpc.MemoryServiceStub(channel).AddMemory(
        mpb.AddMemoryRequest(user_id=uid, content="I am vegetarian")
    )
    assert _found_by_meaning(channel, uid)
    sessions = sessions_pb2_grpc.SessionServiceStub(channel)
    sid = sessions.CreateSession(spb.CreateSessionRequest(user_id=uid)).session.id
    context = context_pb2_grpc.ContextServiceStub(channel)

    def build() -> pb.BuildMessagesResponse:
        return context.BuildMessages(
            pb.BuildMessagesRequest(
                user_message="Do I eat meat?",
                token_budget=4000,
                session=pb.SessionContext(user_id=uid, session_id=sid),
            )
        )

    reply = build()
    assert "I am vegetarian" in reply.messages[0].content
    fake.fail(1, 503)
    reply = build()
    layer = {x.name: x for x in reply.report.context_layers}["memory"]
    assert "ranked by terms only" in layer.note
    assert "I am vegetarian" not in reply.messages[0].content


def test_explain_gives_each_results_term_score_and_cosine(
    channel: grpc.Channel, fake: FakeEmbeddings
) -> None:
    uid = f"u-{uuid.uuid4().hex[:8]}"
    stub = memory_pb2_grpc.MemoryServiceStub(channel)
    stub.AddMemory(mpb.AddMemoryRequest(user_id=uid, content="I am vegetarian"))
    assert _found_by_meaning(channel, uid) == ["I am vegetarian"]

    def search(explain: bool) -> mpb.ScoredMemory:
        request = mpb.SearchMemoriesRequest(user_id=uid, query="vegetarian", explain=explain)
        [result] = stub.SearchMemories(request).results
        return result

    assert not search(explain=False).HasField("explain")
    parts = search(explain=True).explain
    assert parts.HasField("term_score") and parts.term_score > 0
    assert parts.HasField("cosine") and 0 < parts.cosine <= 1.0 + 1e-6
    # Ranked by terms only, when the query cannot be embedded: no cosine.
    fake.fail(1, 500)
    parts = search(explain=True).explain
    assert parts.HasField("term_score") and not parts.HasField("cosine")

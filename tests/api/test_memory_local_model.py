"""``contextd serve`` with no setting at all runs the local model (the default provider):
it loads nothing until memory is used, a search while it loads goes by terms and says so,
and then paraphrases that share no word with their memory are found by meaning, in English
and in Chinese. Skips only where the model's package is missing."""

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

from tests.api.test_workers import READY
from tests.support.server import ServerProcess, start_server
from tests.support.workers import channel_to_worker

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec(PACKAGED_MODELS[DEFAULT_LOCAL_MODEL].package) is None,
    reason="the local model's package is not installed (make .venv/.dev-deps)",
)


LOADED = "local embedding model loaded"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with the defaults: the test suite's own setting (terms only) taken away."""
    proc = start_server(
        Path(tmp_path_factory.mktemp("contextd-data")), unset=("CONTEXTD_EMBEDDING_PROVIDER",)
    )
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def stub(server: ServerProcess) -> Iterator[memory_pb2_grpc.MemoryServiceStub]:
    with grpc.insecure_channel(server.address) as channel:
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        _the_model_loads_on_first_use(server, stub)
        yield stub


def _the_model_loads_on_first_use(
    server: ServerProcess, stub: memory_pb2_grpc.MemoryServiceStub
) -> None:
    """Nothing loaded at start, nor by a call that touches no memory text; the first memory
    starts the load, and a search meanwhile goes by terms with a note."""
    uid = f"u-{uuid.uuid4().hex[:8]}"
    assert stub.ListMemories(mpb.ListMemoriesRequest(user_id=uid)).memories == []
    assert server.logs(LOADED) == []
    stub.AddMemory(mpb.AddMemoryRequest(user_id=uid, content="I have a cat called Miso."))
    early = _search(stub, uid, "cat")  # the model takes seconds to load; this, milliseconds
    assert [r.memory.content for r in early.results] == ["I have a cat called Miso."]
    assert "ranked by terms only" in early.note and "still loading" in early.note
    assert server.wait_for_logs(LOADED, lambda entry: True, timeout=60)
    # The memory written while the model loaded gets its vector once it is ready.
    deadline = time.monotonic() + 30
    while (late := _search(stub, uid, "Which pet do I own?")).note or not late.results:
        assert time.monotonic() < deadline, late
        time.sleep(0.1)
    assert late.results[0].memory.content == "I have a cat called Miso."


def _search(
    stub: memory_pb2_grpc.MemoryServiceStub, uid: str, query: str
) -> mpb.SearchMemoriesResponse:
    return stub.SearchMemories(mpb.SearchMemoriesRequest(user_id=uid, query=query, limit=3))


def _found_by_meaning(
    stub: memory_pb2_grpc.MemoryServiceStub, facts: tuple[str, ...], question: str
) -> mpb.SearchMemoriesResponse:
    uid = f"u-{uuid.uuid4().hex[:8]}"
    for text in facts:
        stub.AddMemory(mpb.AddMemoryRequest(user_id=uid, content=text))
    deadline = time.monotonic() + 60  # the model loads in the background first
    while True:
        reply = _search(stub, uid, question)
        if reply.results or time.monotonic() > deadline:
            return reply
        time.sleep(0.1)


def test_an_english_paraphrase_is_found_by_meaning(
    stub: memory_pb2_grpc.MemoryServiceStub,
) -> None:
    facts = (
        "I have been vegetarian since 2015.",
        "My car is a blue Volkswagen Golf.",
        "I play bass guitar in a jazz band.",
    )
    reply = _found_by_meaning(stub, facts, "Do I eat meat?")
    assert [r.memory.content for r in reply.results][:1] == [facts[0]]
    assert reply.note == ""


def test_a_chinese_paraphrase_is_found_by_meaning(
    stub: memory_pb2_grpc.MemoryServiceStub,
) -> None:
    facts = ("用户不喜欢吃辣", "用户开一辆白色的电动车", "用户每周六早上去公园跑步")
    reply = _found_by_meaning(stub, facts, "我能点四川菜吗")  # no term in common
    assert [r.memory.content for r in reply.results][:1] == [facts[0]]
    assert reply.note == ""


def test_a_question_in_two_steps_finds_both_memories(
    stub: memory_pb2_grpc.MemoryServiceStub,
) -> None:
    """ "What does my sister do?" needs the sister's name, then what that person does: the
    second memory shares no word with the question."""
    uid = f"u-{uuid.uuid4().hex[:8]}"
    facts = (
        "My sister is called Emily.",
        "Emily works as a dentist in Leeds.",
        "On 3 May 2025 I went hiking with Emily.",
        "Oscar works as a pilot in Cork.",
        "I play bass guitar in a jazz band.",
    )
    for text in facts:
        stub.AddMemory(mpb.AddMemoryRequest(user_id=uid, content=text))
    deadline = time.monotonic() + 60  # the model loads, then embeds, in the background
    while True:
        found = [r.memory.content for r in _search(stub, uid, "What does my sister do?").results]
        if found[:2] == list(facts[:2]) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert found[:2] == list(facts[:2])


def test_with_two_workers_a_memory_written_on_one_is_found_by_meaning_on_the_other(
    tmp_path: Path,
) -> None:
    """Each worker loads the model on its own first use: worker 0 for the memories'
    vectors, worker 1 for the question's; the vectors are the database's, so worker 1
    ranks by meaning what worker 0 stored."""
    server = start_server(
        tmp_path, "--workers", "2", unset=("CONTEXTD_EMBEDDING_PROVIDER",), ready=READY
    )
    try:
        writer, _ = channel_to_worker(server, 0)
        reader, _ = channel_to_worker(server, 1)
        assert server.logs(LOADED) == []  # nothing loads before memory is used
        uid = f"u-{uuid.uuid4().hex[:8]}"
        facts = ("I have been vegetarian since 2015.", "My car is a blue Volkswagen Golf.")
        with writer:
            for text in facts:
                memory_pb2_grpc.MemoryServiceStub(writer).AddMemory(
                    mpb.AddMemoryRequest(user_id=uid, content=text)
                )
        with reader:
            stub = memory_pb2_grpc.MemoryServiceStub(reader)
            deadline = time.monotonic() + 60  # both load the model, in the background
            while (reply := _search(stub, uid, "Do I eat meat?")).note or not reply.results:
                assert time.monotonic() < deadline, reply
                time.sleep(0.1)
        assert reply.results[0].memory.content == facts[0]
        assert {line["worker"] for line in server.logs(LOADED)} == {0, 1}
    finally:
        assert server.stop() == 0

"""The Python SDK's search_memories against a server that searches by meaning: the hits
are still a list, and their ``note`` says when the embedding provider failed and the
memories were ranked by their terms alone."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from contextd_client import AsyncContextClient, ContextClient, MemoryHits

from tests.support.fake_embeddings import FakeEmbeddings, fake_embeddings
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.server import start_server


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeEmbeddings]:
    with fake_embeddings(key=FAKE_KEY, synonyms={"vegetarian": "meat", "eat": "meat"}) as server:
        yield server


@pytest.fixture(scope="module")
def address(fake: FakeEmbeddings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc = start_server(
        Path(tmp_path_factory.mktemp("contextd-data")),
        *("--embedding-provider", "openai", "--embedding-base-url", fake.url),
        *("--embedding-model", fake.model),
        env={"OPENAI_API_KEY": FAKE_KEY},
    )
    try:
        yield proc.address
    finally:
        proc.stop()


def _embedded(client: ContextClient, user: str, query: str) -> MemoryHits:
    deadline = time.monotonic() + 10
    while not (hits := client.search_memories(user, query)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return hits


def test_the_note_says_when_the_hits_are_ranked_by_terms(
    address: str, fake: FakeEmbeddings
) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    with ContextClient(address, timeout=10) as client:
        client.add_memory(user, "I am vegetarian")
        hits = _embedded(client, user, "Do I eat meat?")
        assert isinstance(hits, list) and hits.note == ""
        assert [h["content"] for h in hits] == ["I am vegetarian"]
        fake.fail(1, 500)
        hits = client.search_memories(user, "vegetarian")
        assert [h["content"] for h in hits] == ["I am vegetarian"]
        assert "ranked by terms only" in hits.note


async def test_the_async_client_has_the_note_too(address: str, fake: FakeEmbeddings) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    with ContextClient(address, timeout=10) as client:
        client.add_memory(user, "I am vegetarian")
        assert _embedded(client, user, "Do I eat meat?")
    async with AsyncContextClient(address, timeout=10) as aclient:
        fake.fail(1, 500)
        hits = await aclient.search_memories(user, "Do I eat meat?")
        assert hits == [] and "ranked by terms only" in hits.note

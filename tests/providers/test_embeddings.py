"""OpenAIEmbedder against a fake OpenAI-compatible embeddings server; make_embedder."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from contextd.providers.embeddings import (
    DEFAULT_OPENAI_EMBEDDING_MODEL,
    EmbeddingError,
    OpenAIEmbedder,
    make_embedder,
)

from tests.support.fake_embeddings import FakeEmbeddings, fake_embeddings, fake_vector
from tests.support.fakes.helpers import FAKE_KEY


@pytest.fixture
def fake() -> Iterator[FakeEmbeddings]:
    with fake_embeddings(key=FAKE_KEY) as server:
        yield server


def _embedder(fake: FakeEmbeddings, **options: float) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        api_key=FAKE_KEY, model=fake.model, base_url=fake.url, batch_size=2, **options
    )


async def test_request_shape_and_vectors_in_order(fake: FakeEmbeddings) -> None:
    embedder = _embedder(fake)
    try:
        vectors = await embedder.embed(["black coffee", "I am vegetarian", "nurse"], "document")
    finally:
        await embedder.aclose()
    assert vectors == [fake_vector(t) for t in ("black coffee", "I am vegetarian", "nurse")]
    # Batches of two: the third text goes in a second request.
    assert [r["body"]["input"] for r in fake.requests] == [
        ["black coffee", "I am vegetarian"],
        ["nurse"],
    ]
    first = fake.requests[0]
    assert first["path"] == "/v1/embeddings"
    assert first["headers"]["authorization"] == f"Bearer {FAKE_KEY}"
    assert first["body"] == {
        "model": fake.model,
        "input": ["black coffee", "I am vegetarian"],
        "encoding_format": "float",
    }


@pytest.mark.parametrize(("status", "words"), [(500, "HTTP 500"), (429, "rate limited")])
async def test_http_failures_raise_embedding_error(
    fake: FakeEmbeddings, status: int, words: str
) -> None:
    fake.fail(status=status)
    embedder = _embedder(fake)
    try:
        with pytest.raises(EmbeddingError, match=words) as caught:
            await embedder.embed(["x"], "query")
    finally:
        await embedder.aclose()
    assert len(fake.requests) == 1  # not retried here: the caller decides
    assert FAKE_KEY not in str(caught.value)
    assert caught.value.__context__ is None


@pytest.mark.parametrize(("status", "refused"), [(400, True), (422, True), (503, False)])
async def test_refused_input_is_told_apart(
    fake: FakeEmbeddings, status: int, refused: bool
) -> None:
    fake.fail(status=status)
    embedder = _embedder(fake)
    try:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(["x"], "document")
    finally:
        await embedder.aclose()
    assert caught.value.refused is refused


async def test_garbage_answer_raises_embedding_error(fake: FakeEmbeddings) -> None:
    fake.fail(garbage=True)
    embedder = _embedder(fake)
    try:
        with pytest.raises(EmbeddingError):
            await embedder.embed(["x"], "query")
    finally:
        await embedder.aclose()


async def test_slow_answer_times_out(fake: FakeEmbeddings) -> None:
    fake.delay = 1.0
    embedder = _embedder(fake, timeout=0.2)
    started = time.monotonic()
    try:
        with pytest.raises(EmbeddingError, match="timed out"):
            await embedder.embed(["x"], "query")
    finally:
        await embedder.aclose()
    assert time.monotonic() - started < 0.9


async def test_unreachable_raises_embedding_error() -> None:
    embedder = OpenAIEmbedder(api_key="", base_url="http://127.0.0.1:9/v1", timeout=1)
    try:
        with pytest.raises(EmbeddingError, match="could not reach"):
            await embedder.embed(["x"], "document")
    finally:
        await embedder.aclose()


async def test_make_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    assert make_embedder("none", None, None) is None
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    embedder = make_embedder("openai", None, "http://127.0.0.1:9/v1")
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.provider, embedder.model) == ("openai", DEFAULT_OPENAI_EMBEDDING_MODEL)
    await embedder.aclose()
    with pytest.raises(ValueError, match="unknown embedding provider"):
        make_embedder("word2vec", None, None)

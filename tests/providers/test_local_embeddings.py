"""The ``local`` embedding provider with its real model.

The model tests skip only when the local-embeddings extra is not installed; the tests of
what happens without it, or with an unknown model, always run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import os
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from contextd.providers import local_embeddings
from contextd.providers.embeddings import EmbeddingError, make_embedder
from contextd.providers.local_embeddings import (
    DEFAULT_LOCAL_MODEL,
    LocalEmbedder,
    mostly_unspaced_script,
)

EXTRA_INSTALLED = all(
    importlib.util.find_spec(name) is not None
    for name in (
        "sentence_transformers",
        local_embeddings.PACKAGED_MODELS[DEFAULT_LOCAL_MODEL].package,
    )
)
needs_model = pytest.mark.skipif(
    not EXTRA_INSTALLED,
    reason="the local-embeddings extra is not installed: it needs torch, "
    "which no package index or wheelhouse here holds",
)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


@pytest.fixture(scope="module")
def network_attempts() -> Iterator[list[Any]]:
    """Every outbound connection tried while the module's tests run fails, and is recorded."""
    attempts: list[Any] = []
    real_connect = socket.socket.connect

    def refuse(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            attempts.append(address)
            raise OSError("network access refused by the test")
        real_connect(self, address)

    socket.socket.connect = refuse  # type: ignore[method-assign]
    try:
        yield attempts
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]


@pytest.fixture(scope="module")
async def embedder(network_attempts: list[Any]) -> AsyncIterator[LocalEmbedder]:
    made = make_embedder("local", None, None)
    assert isinstance(made, LocalEmbedder)
    try:
        yield made
    finally:
        await made.aclose()


@needs_model
async def test_embeds_english_and_chinese_one_unit_vector_per_text(
    embedder: LocalEmbedder,
) -> None:
    texts = ["I have been vegetarian since 2015.", "Ich bin Vegetarier, 素食", "x"]
    vectors = await embedder.embed(texts, "document")
    assert len(vectors) == 3
    assert {len(v) for v in vectors} == {384}
    for v in vectors:
        assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-4)
    assert await embedder.embed([], "query") == []
    assert embedder.provider == "local"
    assert embedder.model == DEFAULT_LOCAL_MODEL


@needs_model
async def test_similar_sentences_are_closer_than_unrelated_ones(embedder: LocalEmbedder) -> None:
    question, answer, unrelated = await embedder.embed(
        ["Do I eat meat?", "I have been vegetarian since 2015.", "My car is a blue Golf."],
        "query",
    )
    assert cosine(question, answer) > cosine(question, unrelated) + 0.1


@needs_model
async def test_the_model_runs_off_the_event_loop_thread(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[threading.Thread] = []
    encode = embedder._encode

    def recording(texts: list[str]) -> list[list[float]]:
        threads.append(threading.current_thread())
        return encode(texts)

    monkeypatch.setattr(embedder, "_encode", recording)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    await embedder.embed(["a fairly long sentence to keep the model busy " * 20] * 16, "document")
    ticker.cancel()
    assert threads and threads[0] is not threading.main_thread()
    assert threads[0].name.startswith("contextd-embed")
    assert ticks > 1  # the loop kept running while the model worked


@needs_model
async def test_no_network_access_is_attempted(
    embedder: LocalEmbedder, network_attempts: list[Any]
) -> None:
    await embedder.embed(["offline, always"], "query")
    assert network_attempts == []
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"


@needs_model
async def test_the_english_model_refuses_chinese_japanese_and_korean(
    embedder: LocalEmbedder,
) -> None:
    assert embedder.min_similarity == 0.2
    for purpose in ("query", "document"):
        with pytest.raises(EmbeddingError, match="reads English only") as refused:
            await embedder.embed(["I am vegetarian", "用户不喜欢吃辣"], purpose)
        assert refused.value.refused
    assert len(await embedder.embed(["Can I eat Sichuan food? 四川"], "query")) == 1


@needs_model
async def test_any_script_embeds_what_the_model_cannot_read() -> None:
    measuring = LocalEmbedder(any_script=True)
    try:
        vectors = await measuring.embed(
            ["用户喜欢吃辣吗", "用户不喜欢吃辣", "用户开一辆白色的电动车"], "document"
        )
    finally:
        await measuring.aclose()
    assert [len(v) for v in vectors] == [384, 384, 384]
    question, answer, unrelated = vectors
    assert cosine(question, answer) > cosine(question, unrelated)


def test_mostly_unspaced_script() -> None:
    assert mostly_unspaced_script("用户能吃四川菜吗")
    assert mostly_unspaced_script("我喜欢 sushi")
    assert mostly_unspaced_script("コーヒーが好き")
    assert not mostly_unspaced_script("I like 咖啡 a lot")
    assert not mostly_unspaced_script("Café au lait, s'il vous plaît")
    assert not mostly_unspaced_script("12:30 !")


def test_an_unknown_model_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown local embedding model 'no-such-model'"):
        LocalEmbedder("no-such-model")


def test_without_the_model_package_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_find_spec = importlib.util.find_spec

    def missing(name: str, *args: Any) -> Any:
        return None if name == "sentence_transformers" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", missing)
    with pytest.raises(ValueError, match=r"pip install contextd\[local-embeddings\]"):
        make_embedder("local", None, None)

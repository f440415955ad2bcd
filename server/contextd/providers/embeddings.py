"""Embedding providers: text in, one vector per text out, for search by meaning.

``make_embedder`` builds one by name:

* ``none``: no embedder; memory search ranks by terms and recency only.
* ``openai``: any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Azure,
  Ollama, vLLM...) through the official ``openai`` SDK. The request is
  ``POST {base_url}/embeddings`` with ``model``, ``input`` (a list of texts)
  and ``encoding_format: "float"``; longer lists go out in batches of
  ``batch_size``. The key comes from the environment as for chat
  (``CONTEXTD_OPENAI_API_KEY``, else ``OPENAI_API_KEY``; none: ``no-key``).
* ``local``: a multilingual model run on the CPU from weights inside an installed
  package (:mod:`contextd.providers.local_embeddings`), imported only when chosen.

Every failure (unreachable, refused, timed out, an answer of the wrong shape)
is raised as :class:`EmbeddingError`; callers degrade to search by terms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal, Protocol, cast

from contextd.providers._sdk import Redactor, map_sdk_error
from contextd.providers.errors import ProviderRateLimited
from contextd.providers.registry import api_key_from_env

EmbeddingPurpose = Literal["document", "query"]  # some models embed the two differently

EMBEDDING_PROVIDERS = ("none", "openai", "local")
DEFAULT_OPENAI_EMBEDDING_MODEL = "text-embedding-3-small"
DEFAULT_EMBEDDING_BATCH = 64
_REFUSED_STATUSES = frozenset({400, 413, 422})


class EmbeddingError(Exception):
    """The provider could not embed (unreachable, refused, bad answer, timed out).

    ``retry_after`` (seconds) when the provider said how long to wait; ``refused`` when
    it refused the texts themselves (HTTP 400, 413, 422: too long, say), so that sending
    them again cannot succeed.
    """

    def __init__(
        self, message: str, retry_after: float | None = None, *, refused: bool = False
    ) -> None:
        self.retry_after = retry_after
        self.refused = refused
        super().__init__(message)


class Embedder(Protocol):
    provider: str  # "openai" | "local"
    model: str  # the model id; stored with every vector, a change re-embeds

    async def embed(self, texts: Sequence[str], purpose: EmbeddingPurpose) -> list[list[float]]:
        """One vector per text, in order. Raises EmbeddingError. Must not block the
        event loop (a CPU model runs in a worker thread)."""
        ...

    async def aclose(self) -> None: ...


class OpenAIEmbedder:
    """Embeds through an OpenAI-compatible ``/embeddings`` endpoint.

    ``timeout`` bounds each request; the SDK's own retries are off: a failed
    batch raises at once and the caller decides when to try again (the
    background worker backs off, a search falls back to terms).
    """

    provider = "openai"

    def __init__(
        self,
        *,
        api_key: str,
        model: str = DEFAULT_OPENAI_EMBEDDING_MODEL,
        base_url: str = "",
        timeout: float = 10.0,
        batch_size: int = DEFAULT_EMBEDDING_BATCH,
    ) -> None:
        # Imported here: the SDK (about 50 MB resident with pydantic and its HTTP
        # client) loads only for a server that calls an OpenAI-compatible API.
        import openai

        from contextd.providers.openai_compat import DEFAULT_OPENAI_BASE_URL, OPENAI_ERRORS
        from contextd.providers.sdk_provider import NO_KEY

        self.model = model or DEFAULT_OPENAI_EMBEDDING_MODEL
        self.base_url = base_url or DEFAULT_OPENAI_BASE_URL
        self.batch_size = max(1, batch_size)
        self._sdk = OPENAI_ERRORS
        self._redactor = Redactor.for_config(api_key, None)
        self._client = openai.AsyncOpenAI(
            api_key=api_key or NO_KEY, base_url=self.base_url, timeout=timeout, max_retries=0
        )

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(base_url={self.base_url!r}, model={self.model!r})"

    async def embed(self, texts: Sequence[str], purpose: EmbeddingPurpose) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors += await self._batch(list(texts[start : start + self.batch_size]))
        return vectors

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        create = cast(Any, self._client.embeddings.create)
        failure: EmbeddingError | None = None
        try:
            response = await create(model=self.model, input=texts, encoding_format="float")
            return _vectors(response, len(texts))
        except EmbeddingError as exc:
            failure = exc
        except Exception as exc:
            mapped = map_sdk_error(
                exc, provider=self.provider, sdk=self._sdk, redactor=self._redactor
            )
            if mapped is None:
                raise
            retry_after = mapped.retry_after if isinstance(mapped, ProviderRateLimited) else None
            refused = getattr(exc, "status_code", 0) in _REFUSED_STATUSES
            failure = EmbeddingError(str(mapped), retry_after, refused=refused)
        # Raised outside the except block: the SDK exception (its request holds the key
        # header) must not ride along as __context__.
        raise failure

    async def aclose(self) -> None:
        await self._client.close()


def _vectors(response: object, count: int) -> list[list[float]]:
    """The response's vectors in input order; EmbeddingError when it is malformed."""
    data = getattr(response, "data", None)
    if not isinstance(data, list) or len(data) != count:
        raise EmbeddingError(f"openai: expected {count} embeddings, got a malformed answer")
    ordered: list[list[float] | None] = [None] * count
    for position, item in enumerate(data):
        index = getattr(item, "index", position)
        vector = getattr(item, "embedding", None)
        if not isinstance(index, int) or not 0 <= index < count or ordered[index] is not None:
            raise EmbeddingError("openai: the answer's embedding indexes do not match the input")
        if not isinstance(vector, list) or not vector:
            raise EmbeddingError("openai: an embedding is not a list of numbers")
        if not all(isinstance(x, int | float) and math.isfinite(x) for x in vector):
            raise EmbeddingError("openai: an embedding is not a list of numbers")
        ordered[index] = [float(x) for x in vector]
    vectors = [v for v in ordered if v is not None]
    if len({len(v) for v in vectors}) != 1:
        raise EmbeddingError("openai: the embeddings differ in dimension")
    return vectors


def unknown_provider(provider: str) -> str | None:
    """Why ``provider`` names no embedding provider, or None when it names one."""
    if provider in EMBEDDING_PROVIDERS:
        return None
    return (
        f"unknown embedding provider {provider!r}; expected one of {', '.join(EMBEDDING_PROVIDERS)}"
    )


def make_embedder(
    provider: str, model: str | None, base_url: str | None, *, timeout: float = 10.0
) -> Embedder | None:
    """The embedder named ``provider`` ("none", "openai" or "local"); None for "none".

    Raises ValueError for an unknown name, and for ``local`` with an unknown model or
    when its package is not installed (the message says how to install it).
    """
    if provider == "none":
        return None
    if provider == "openai":
        return OpenAIEmbedder(
            api_key=api_key_from_env("openai"),
            model=model or DEFAULT_OPENAI_EMBEDDING_MODEL,
            base_url=base_url or "",
            timeout=timeout,
        )
    if provider == "local":
        from contextd.providers.local_embeddings import LocalEmbedder  # imports this module

        return LocalEmbedder(model or None)
    raise ValueError(unknown_provider(provider))

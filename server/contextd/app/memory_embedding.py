"""Search by meaning: memories embedded in the background, queries embedded at search time.

:class:`EmbeddingWorker` gives every memory without a vector of the server's model one:
woken when memories are added or rewritten, and every ``poll_interval`` seconds anyway
(memories another replica added, or left behind by a failure). It embeds a batch at a
time (a text the provider refuses, as too long say, is left to its terms); when the
provider fails otherwise it waits (doubling from ``retry_delay`` up to
``max_retry_delay``, or the provider's ``Retry-After``) and tries again: a memory is never
lost, only found by its terms until its vector is stored. Two replicas may embed the same
memory at once; the later write wins with an equal vector.

:class:`EmbeddingRanker` is the MeaningRanker that MemoryRepo.search fuses with its term
ranking: it embeds the query (purpose "query") within ``timeout`` seconds and compares it
with the user's vectors; a failure or timeout gives an empty ranking and a note, never an
error, so the search falls back to terms.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Sequence, Set
from dataclasses import dataclass

from contextd.app.scope import USER_FACTS
from contextd.core.memory_bridge import question_names, without_names
from contextd.core.memory_facts.facts import ExistingMemory
from contextd.core.memory_facts.reconciliation import MeaningThresholds
from contextd.metrics.across import Across
from contextd.metrics.prometheus import PrometheusRecorder
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.providers.embeddings import Embedder, EmbeddingError, EmbeddingPurpose
from contextd.store.memory.hybrid import MeaningRanking, Owner
from contextd.store.memory.repository import MemoryRepo
from contextd.store.memory.vectors import PENDING_BATCH, MemoryVectorRepo, PendingMemory

log = logging.getLogger("contextd.memory_embedding")

# Below this cosine a memory is not "close in meaning" at all. A provider may say
# otherwise through a ``min_similarity`` attribute (models differ in their baseline).
DEFAULT_MIN_SIMILARITY = 0.3
# Reconciliation after a turn (core/memory_facts/reconciliation.py): a new fact this
# close to a memory says the same thing (restated, not stored twice); this close, and
# the memory states a single-valued fact, it gives that fact a new value. Measured on
# all-MiniLM-L6-v2 (bench/README.md): different facts of the same shape reach 0.93, so
# only near-identical wordings count as duplicates. A provider may set its own
# (``duplicate_similarity``, ``same_subject_similarity`` attributes).
DEFAULT_DUPLICATE_SIMILARITY = 0.96
DEFAULT_SAME_SUBJECT_SIMILARITY = 0.55
DEFAULT_QUERY_TIMEOUT = 2.0
# A fact's nearest memories looked at for the first one it may restate or replace.
CLOSEST_LOOKED_AT = 5


@dataclass(slots=True)
class EmbeddingStats:
    calls: int = 0  # embedding calls of the worker and of searches
    failures: int = 0  # of those, how many failed or timed out
    embedded: int = 0  # memory vectors stored
    pending: int = 0  # memories without a vector, as last counted by the worker


class EmbeddingRanker:
    def __init__(
        self,
        embedder: Embedder,
        vectors: MemoryVectorRepo,
        stats: EmbeddingStats,
        *,
        timeout: float = DEFAULT_QUERY_TIMEOUT,
    ) -> None:
        self._embedder = embedder
        self._vectors = vectors
        self._stats = stats
        self._timeout = timeout
        floor = getattr(embedder, "min_similarity", DEFAULT_MIN_SIMILARITY)
        self.min_similarity = float(floor)
        self.thresholds = MeaningThresholds(
            float(getattr(embedder, "duplicate_similarity", DEFAULT_DUPLICATE_SIMILARITY)),
            float(getattr(embedder, "same_subject_similarity", DEFAULT_SAME_SUBJECT_SIMILARITY)),
        )

    async def rank(
        self,
        owner: Owner,
        query: str,
        count: int,
        purpose: EmbeddingPurpose = "query",
        *,
        allowed: Set[int] | Awaitable[Set[int]] | None = None,
    ) -> MeaningRanking:
        if not query.strip():
            return MeaningRanking()
        texts = [query]
        # A question that names someone is embedded without the names too, in the same
        # call: both cosines are ranked (core/memory_ranking.py).
        names = question_names(query) if purpose == "query" else []
        if names and (free := without_names(query, names)) and free != query:
            texts.append(free)
        self._stats.calls += 1
        try:
            vectors = await asyncio.wait_for(self._embedder.embed(texts, purpose), self._timeout)
        except Exception as error:  # whatever the provider does, the search goes on
            reason = str(error) or f"no answer within {self._timeout:g} s"
            if isinstance(error, EmbeddingError) and error.refused:
                # Not a failure: the provider does not take such text (a language it
                # cannot read, say).
                return MeaningRanking(note=f"ranked by terms only: {reason}")
            self._stats.failures += 1
            log.warning(
                "query not embedded; searching by terms",
                extra={"error": f"{type(error).__name__}: {reason}"},
            )
            return MeaningRanking(
                note=f"ranked by terms only: the query was not embedded ({reason})"
            )
        if allowed is not None and not isinstance(allowed, Set):
            allowed = await allowed  # read while the query was embedded
        hits, cosines = await self._vectors.nearest_with_cosines(owner, vectors[0], count, allowed)
        floor = self.min_similarity
        name_free = None
        if len(vectors) > 1:
            free_vector = vectors[1]

            async def name_free(ids: Sequence[int]) -> dict[int, float]:
                return cosines.with_query(free_vector, ids)

        async def asked(text: str, ids: Sequence[int]) -> dict[int, float]:
            """Cosines with another text; nothing when it cannot be embedded in time."""
            self._stats.calls += 1
            try:
                embed = self._embedder.embed([text], "query")
                (vector,) = await asyncio.wait_for(embed, self._timeout)
            except Exception:
                self._stats.failures += 1
                return {}
            return cosines.with_query(vector, ids)

        return MeaningRanking(
            [(mid, sim) for mid, sim in hits if sim >= floor],
            floor=floor,
            cosines=cosines.of,
            name_free=name_free,
            asked=asked,
        )


class EmbeddingWorker:
    def __init__(
        self,
        embedder: Embedder,
        vectors: MemoryVectorRepo,
        stats: EmbeddingStats,
        *,
        batch_size: int = PENDING_BATCH,
        poll_interval: float = 30.0,
        retry_delay: float = 1.0,
        max_retry_delay: float = 60.0,
    ) -> None:
        self._embedder = embedder
        self._vectors = vectors
        self.stats = stats
        self._batch = batch_size
        self._poll = poll_interval
        self._retry_delay = retry_delay
        self._max_retry_delay = max_retry_delay
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="memory-embedding")

    def wake(self) -> None:
        """Memories may need vectors: look soon (at once unless waiting after a failure)."""
        self._idle.clear()
        self._wake.set()

    async def wait_idle(self) -> None:
        """Until a pass found nothing left to embed (for tests and tools)."""
        await self._idle.wait()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        failures = 0
        while True:
            self._wake.clear()
            try:
                await self.embed_pending()
            except EmbeddingError as error:
                failures += 1
                delay = min(self._max_retry_delay, self._retry_delay * 2 ** (failures - 1))
                delay = max(delay, min(error.retry_after or 0.0, self._max_retry_delay))
                log.warning(
                    "memories not embedded; trying again later",
                    extra={"error": str(error), "retry_in": delay},
                )
                await asyncio.sleep(delay)  # wakes meanwhile wait: the provider is failing
                continue
            except Exception:
                failures += 1
                log.exception("memory embedding failed; trying again later")
                await asyncio.sleep(min(self._max_retry_delay, self._retry_delay * 2**failures))
                continue
            failures = 0
            self._idle.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._poll)

    async def embed_pending(self) -> int:
        """Embed every memory without a vector of this model; how many were stored."""
        stored = 0
        after = 0
        self.stats.pending = await self._vectors.count_pending()
        while batch := await self._vectors.pending(after, self._batch):
            vectors = await self._embed(batch)
            done = await self._vectors.save(batch, vectors)
            stored += done
            self.stats.embedded += done
            self.stats.pending = max(0, self.stats.pending - done)
            after = batch[-1].id
        return stored

    async def _embed(self, batch: Sequence[PendingMemory]) -> Sequence[list[float] | None]:
        """The batch's vectors; when the provider refuses the batch, each memory alone,
        None for those it refuses alone (one text it cannot take must not hold up the
        others forever)."""
        self.stats.calls += 1
        try:
            return await self._embedder.embed([m.content for m in batch], "document")
        except EmbeddingError as error:
            self.stats.failures += 1
            if not error.refused:
                raise
            if len(batch) == 1:
                # INFO: a provider may refuse a whole language by design (the local
                # model, Chinese text), and each memory of it would warn otherwise.
                log.info(
                    "a memory's text was refused by the embedding provider; "
                    "it is found by its terms only",
                    extra={"memory_id": batch[0].id, "error": str(error)},
                )
                return [None]
        return [vector for memory in batch for vector in await self._embed([memory])]


@dataclass(frozen=True, slots=True)
class MeaningSearch:
    """Search by meaning, wired: the ranker and the worker share the embedder, the vectors
    and the counters."""

    ranker: EmbeddingRanker  # MemoryRepo's ``meaning``
    worker: EmbeddingWorker  # its ``wake`` is MemoryRepo's ``changed``; to start and to close


def search_by_meaning(
    embedder: Embedder,
    vectors: MemoryVectorRepo,
    *,
    query_timeout: float = DEFAULT_QUERY_TIMEOUT,
    metrics: Recorder = NULL_RECORDER,
) -> MeaningSearch:
    """What turns on search by meaning, for the MemoryRepo to be made with it; its
    counters exported to ``metrics``."""
    stats = EmbeddingStats()
    search = MeaningSearch(
        EmbeddingRanker(embedder, vectors, stats, timeout=query_timeout),
        EmbeddingWorker(embedder, vectors, stats),
    )
    if isinstance(metrics, PrometheusRecorder):
        metrics.counter(
            "contextd_embedding_calls",
            "Embedding provider calls (memories in the background, and search queries).",
            lambda: stats.calls,
        )
        metrics.counter(
            "contextd_embedding_failures",
            "Embedding provider calls that failed or timed out.",
            lambda: stats.failures,
        )
        metrics.gauge(
            "contextd_embedding_pending",
            "Memories without a vector of the server's model, as last counted.",
            lambda: stats.pending,
            Across.SAME,  # each worker counts the same database's
        )
    return search


async def closest_memories(
    memories: MemoryRepo, owner: Owner, texts: Sequence[str]
) -> tuple[dict[str, tuple[ExistingMemory, float]], MeaningThresholds | None]:
    """Each text's nearest memory of the owner by meaning, with their cosine, and the
    thresholds to judge them by; nothing when search by meaning is off or fails."""
    ranker = memories.meaning
    if not isinstance(ranker, EmbeddingRanker):
        return {}, None
    closest: dict[str, tuple[ExistingMemory, float]] = {}
    for text in texts:
        ranking = await ranker.rank(owner, text, CLOSEST_LOOKED_AT, "document")
        ids = [memory_id for memory_id, _ in ranking.hits]
        found = {m.id: m for m in await memories.among(owner, ids, USER_FACTS)}
        for memory_id, cosine in ranking.hits:
            if memory_id in found:
                closest[text] = (ExistingMemory(memory_id, found[memory_id].content), cosine)
                break
    return closest, ranker.thresholds

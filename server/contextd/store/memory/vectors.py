"""The memories' vectors: stored with each memory (migration 0013), searched per user.

A vector belongs to the memory row, so it follows the memory's owner and goes with it
(deleting a memory or a user deletes its vectors); a rewrite of the text clears it
(MemoryRepo.rewrite) until the background worker embeds the new text. Vectors of a
model other than the server's count as missing, and are made again.

Search compares a query vector with one user's vectors only: a matrix of that user's
unit vectors is cached in the process and checked on each search against the user's
latest ``embedded_at`` (one index lookup), which every stored vector moves forward, so a
vector stored by another process (a PostgreSQL replica) is seen by the next search. A
deleted memory's vector may stay in a cached matrix until the next vector is stored:
the search reads the memories it found from the table, so a deleted one is never
returned. A memory superseded by a new text keeps its vector in the superseded copy
made of it (store/memory/versions.py), for searches as of an earlier time. A memory
whose text changed keeps ranking by its old vector until the worker
stores the new one (at once, in the background). The cosines are one matrix-vector
product (numpy).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Sequence, Set
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from contextd.core.search_terms import content_hash
from contextd.store.engine.database import Database

Owner = tuple[str, str]  # (tenant id, user id)
# Users whose matrices stay cached, least recently searched dropped first.
DEFAULT_CACHED_USERS = 256
PENDING_BATCH = 64


@dataclass(frozen=True, slots=True)
class PendingMemory:
    """A memory to embed: its text as read (the vector is kept only if it still says so)."""

    id: int
    content: str


@dataclass(frozen=True, slots=True)
class _Matrix:
    signature: float  # the user's latest embedded_at when it was read
    ids: npt.NDArray[np.int64]
    unit: npt.NDArray[np.float32]  # one unit vector per row, in the order of ids


@dataclass(frozen=True, slots=True)
class Cosines:
    """Every memory's cosine with one query: ``ids`` ascending, ``values`` in their order
    (-inf for a memory a search's filter leaves out), and the unit vectors they came
    from (``unit``, one row per id), which give the cosines with another text of the
    same search without reading the vectors' state again."""

    ids: npt.NDArray[np.int64]
    values: npt.NDArray[np.float32]
    unit: npt.NDArray[np.float32]

    def of(self, wanted: Sequence[int]) -> dict[int, float]:
        """The cosines of those of ``wanted`` that have a vector (and meet the filter)."""
        if not len(self.ids) or not wanted:
            return {}
        asked, at, found = self._rows(wanted)
        found &= np.isfinite(self.values[at])
        values = self.values[at][found]
        return {int(mid): float(v) for mid, v in zip(asked[found], values, strict=True)}

    def with_query(self, query: Sequence[float], ids: Sequence[int]) -> dict[int, float]:
        """The cosines with ``query`` of those of the memories ``ids`` that have a vector
        (a second text a search compares with a few candidates), the filter aside."""
        if not len(self.ids) or not ids or self.unit.shape[1] != len(query):
            return {}
        asked, at, found = self._rows(ids)
        rows = self.unit[at[found]]
        values = np.einsum("ij,j->i", rows, _unit(np.asarray(query, dtype=np.float32)))
        return {int(mid): float(v) for mid, v in zip(asked[found], values, strict=True)}

    def _rows(
        self, wanted: Sequence[int]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.intp], npt.NDArray[np.bool_]]:
        """``wanted`` as an array, the row each would be at, and which of them have one."""
        asked = np.asarray(wanted, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.ids, asked), len(self.ids) - 1)
        return asked, at, self.ids[at] == asked


NO_COSINES = Cosines(np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros((0, 0), np.float32))


def to_blob(vector: Sequence[float]) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def _unit(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return (matrix / np.where(norms == 0, 1, norms)).astype(np.float32, copy=False)


class MemoryVectorRepo:
    """Reads and writes the memories' vectors of one model (the server's)."""

    def __init__(self, db: Database, model: str, *, cached_users: int = DEFAULT_CACHED_USERS):
        if not model:
            raise ValueError("an embedding model id is needed")
        self._db = db
        self.model = model
        self._cached_users = cached_users
        self._matrices: OrderedDict[Owner, _Matrix] = OrderedDict()
        self._loading: dict[Owner, asyncio.Lock] = {}

    # --- the background worker's side ----------------------------------------------------

    async def pending(self, after_id: int = 0, limit: int = PENDING_BATCH) -> list[PendingMemory]:
        """Memories with no vector of this model, in id order from ``after_id``."""
        rows = await self._db.reader.execute_fetchall(
            "SELECT id, content FROM memories"
            " WHERE (embedding_model < ? OR embedding_model > ?) AND id > ? ORDER BY id LIMIT ?",
            (self.model, self.model, after_id, limit),
        )
        return [PendingMemory(int(row["id"]), row["content"]) for row in rows]

    async def count_pending(self) -> int:
        rows = list(
            await self._db.reader.execute_fetchall(
                "SELECT COUNT(*) AS pending FROM memories"
                " WHERE embedding_model < ? OR embedding_model > ?",
                (self.model, self.model),
            )
        )
        return int(rows[0]["pending"])

    async def save(
        self, memories: Sequence[PendingMemory], vectors: Sequence[Sequence[float] | None]
    ) -> int:
        """Store each memory's vector, unless its text changed since it was read (that
        text is embedded on a later pass); how many were stored. None for a text the
        provider refused: the memory is marked done for this model, without a vector
        (found by its terms only; tried again when its text or the model changes).
        ``embedded_at`` moves past the user's latest even when clocks of replicas
        differ: it is what searches check their cached matrix against."""
        now = time.time()
        stored = 0
        async with self._db.transaction() as conn:
            for memory, vector in zip(memories, vectors, strict=True):
                rows = await conn.execute_fetchall(
                    "UPDATE memories SET embedding = ?, embedding_model = ?, embedding_dims = ?,"
                    " embedded_at = max(?, COALESCE((SELECT v.embedded_at FROM memories v"
                    " WHERE v.tenant_id = memories.tenant_id AND v.user_id = memories.user_id"
                    " AND v.embedding_model = ? ORDER BY v.embedded_at DESC LIMIT 1), 0) + 0.001)"
                    " WHERE id = ? AND content_hash = ? RETURNING id",
                    (
                        None if vector is None else to_blob(vector),
                        self.model,
                        0 if vector is None else len(vector),
                        now,
                        self.model,
                        memory.id,
                        content_hash(memory.content),
                    ),
                )
                stored += len(list(rows)) if vector is not None else 0
        return stored

    # --- search ---------------------------------------------------------------------------

    async def nearest(
        self, owner: Owner, query: Sequence[float], count: int, allowed: Set[int] | None = None
    ) -> list[tuple[int, float]]:
        """The owner's ``count`` memories whose vectors are closest to ``query``, as
        (memory id, cosine), best first; only memories in ``allowed``, when given (a
        search's filter)."""
        hits, _ = await self.nearest_with_cosines(owner, query, count, allowed)
        return hits

    async def nearest_with_cosines(
        self, owner: Owner, query: Sequence[float], count: int, allowed: Set[int] | None = None
    ) -> tuple[list[tuple[int, float]], Cosines]:
        """:meth:`nearest`, and the cosine of every memory of the owner with ``query``
        (computed for the ranking anyway): what a search's second hop ranks by."""
        matrix = await self._matrix(owner)
        if matrix is None or count < 1:
            return [], NO_COSINES
        if matrix.unit.shape[1] != len(query):
            return [], NO_COSINES  # a vector of another dimension cannot be compared
        # einsum, not @: it stays on this thread, while BLAS hands a matrix-vector product
        # to its thread pool, which waits for busy cores (bench/README.md).
        similarity = np.einsum("ij,j->i", matrix.unit, _unit(np.asarray(query, dtype=np.float32)))
        cosines = Cosines(matrix.ids, similarity, matrix.unit)
        if allowed is not None:
            keep = np.isin(matrix.ids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
            similarity = np.where(keep, similarity, -np.inf)
            cosines = Cosines(matrix.ids, similarity, matrix.unit)
            count = min(count, int(keep.sum()))
            if count < 1:
                return [], cosines
        if len(similarity) > count:
            top = np.argpartition(-similarity, count - 1)[:count]
            top = top[np.argsort(-similarity[top], kind="stable")]
        else:
            top = np.argsort(-similarity, kind="stable")
        return [(int(matrix.ids[i]), float(similarity[i])) for i in top], cosines

    async def vectors_of(
        self, owner: Owner, ids: Sequence[int]
    ) -> dict[int, npt.NDArray[np.float32]]:
        """The owner's stored unit vectors of these memories (those it has): what the
        recall benchmark ranks by meaning alone, beside the server's search."""
        matrix = await self._matrix(owner)
        if matrix is None:
            return {}
        wanted = set(ids)
        return {
            int(mid): matrix.unit[row]
            for row, mid in enumerate(matrix.ids.tolist())
            if mid in wanted
        }

    def forget(self, owner: Owner) -> None:
        """Drop the owner's cached matrix (their vectors changed in this process)."""
        self._matrices.pop(owner, None)

    async def _signature(self, owner: Owner) -> float:
        rows = list(
            await self._db.reader.execute_fetchall(
                # Not MAX(): that form the planner may answer by reading all the rows.
                "SELECT embedded_at FROM memories"
                " WHERE tenant_id = ? AND user_id = ? AND embedding_model = ?"
                " ORDER BY embedded_at DESC LIMIT 1",
                (*owner, self.model),
            )
        )
        return float(rows[0]["embedded_at"]) if rows else 0.0

    async def _matrix(self, owner: Owner) -> _Matrix | None:
        signature = await self._signature(owner)
        if not signature:
            self.forget(owner)
            return None
        cached = self._matrices.get(owner)
        if cached is not None and cached.signature == signature:
            self._matrices.move_to_end(owner)
            return cached
        lock = self._loading.setdefault(owner, asyncio.Lock())
        async with lock:
            cached = self._matrices.get(owner)
            if cached is None or cached.signature != signature:
                cached = await self._load(owner)
                self._matrices[owner] = cached
                while len(self._matrices) > self._cached_users:
                    self._matrices.popitem(last=False)
        self._loading.pop(owner, None)
        self._matrices.move_to_end(owner)
        return cached

    async def _load(self, owner: Owner) -> _Matrix:
        # The signature is read again with the rows, so the two describe the same state.
        signature = await self._signature(owner)
        rows = await self._db.reader.execute_fetchall(
            "SELECT id, embedding, embedding_dims FROM memories"
            " WHERE tenant_id = ? AND user_id = ? AND embedding_model = ? ORDER BY id",
            (*owner, self.model),
        )
        dims = max((int(r["embedding_dims"]) for r in rows), default=0)
        kept = [
            (int(r["id"]), bytes(r["embedding"]))
            for r in rows
            if int(r["embedding_dims"]) == dims and r["embedding"] is not None
        ]
        ids = np.fromiter((mid for mid, _ in kept), dtype=np.int64, count=len(kept))
        raw = np.frombuffer(b"".join(blob for _, blob in kept), dtype="<f4")
        unit = _unit(raw.reshape(len(kept), dims) if kept else np.zeros((0, 0), np.float32))
        return _Matrix(signature, ids, unit)

"""The plain retrieval that bench/memory_recall.py sets contextd's search against, on the
same memories of each user: BM25 alone (Okapi, over the server's own search terms), the
local model's cosines alone ("dense"), and textbook reciprocal-rank fusion of the two
(k = 60). Each ranks all of a user's memories; no recency, no floor.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from _recall_life import Kind, Question
from contextd.core.search_terms import index_terms, query_terms

BM25_K1 = 1.2
BM25_B = 0.75
RRF_K = 60.0


class Bm25:
    """Okapi BM25 over one user's memories, the index's terms standing for words."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._docs = [Counter(index_terms(t)) for t in texts]
        lengths = [sum(d.values()) for d in self._docs]
        self._lengths = lengths
        self._average = sum(lengths) / max(1, len(lengths))
        frequency: Counter[str] = Counter()
        for doc in self._docs:
            frequency.update(doc.keys())
        n = len(self._docs)
        self._idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in frequency.items()}

    def rank(self, query: str) -> list[int]:
        """Indexes of the memories holding a query term, best first."""
        terms = query_terms(query)
        scores: dict[int, float] = {}
        for i, doc in enumerate(self._docs):
            norm = BM25_K1 * (1 - BM25_B + BM25_B * self._lengths[i] / self._average)
            score = sum(
                self._idf[t] * doc[t] * (BM25_K1 + 1) / (doc[t] + norm) for t in terms if t in doc
            )
            if score > 0:
                scores[i] = score
        return sorted(scores, key=lambda i: (-scores[i], i))


def dense_rank(query: npt.NDArray[np.float32], matrix: npt.NDArray[np.float32]) -> list[int]:
    """Every memory by cosine with the query, best first (the vectors are unit length)."""
    similarity = np.einsum("ij,j->i", matrix, query)
    return [int(i) for i in np.argsort(-similarity, kind="stable")]


def rrf_rank(*rankings: Sequence[int], k: float = RRF_K) -> list[int]:
    """Reciprocal-rank fusion: each ranking adds ``1 / (k + rank)`` to every item in it."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(fused, key=lambda i: (-fused[i], i))


@dataclass
class Scores:
    """Each question's rank of its answer (its worst-ranked memory for multi-hop ones;
    0: not in the first 10), by language and kind; and for multi-hop ones the rank of
    their best-ranked memory (``one``: at least one of the two found)."""

    ranks: dict[tuple[str, Kind], list[int]] = field(default_factory=dict)
    one: dict[tuple[str, Kind], list[int]] = field(default_factory=dict)

    def add(self, q: Question, found: Sequence[str]) -> None:
        top = list(found[:10])
        ranks = [top.index(a) + 1 if a in top else 0 for a in q.answers]
        self.ranks.setdefault((q.row, q.kind), []).append(0 if 0 in ranks else max(ranks))
        self.one.setdefault((q.row, q.kind), []).append(min([r for r in ranks if r], default=0))

    def recall(self, key: tuple[str, Kind]) -> float:
        return _recall(self.ranks.get(key, []))

    def recall_of(self, keys: Sequence[tuple[str, Kind]]) -> float:
        """Recall@5 over the questions of all ``keys``."""
        return _recall([r for key in keys for r in self.ranks.get(key, [])])

    def recall_one(self, key: tuple[str, Kind]) -> float:
        """Recall@5 of at least one of a question's memories."""
        return _recall(self.one.get(key, []))

    def mrr(self, key: tuple[str, Kind]) -> float:
        ranks = self.ranks.get(key, [])
        return sum(1 / r for r in ranks if r > 0) / max(1, len(ranks))


def _recall(ranks: Sequence[int]) -> float:
    return sum(1 for r in ranks if 0 < r <= 5) / max(1, len(ranks))

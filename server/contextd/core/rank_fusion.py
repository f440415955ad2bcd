"""Reciprocal rank fusion: one ranking made of several, by rank alone.

Each list adds ``1 / (k + rank)`` (rank 1 = its best) to every item it holds, so an item
near the top of both the term ranking and the vector ranking beats one at the top of
only one; scores of different kinds (bm25, cosine) never need to be made comparable.
``k`` = 60 is the usual constant: it keeps the first few ranks from dominating.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

DEFAULT_RRF_K = 60.0

K = TypeVar("K", bound=Hashable)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[K]], k: float = DEFAULT_RRF_K
) -> dict[K, float]:
    """Each item's fused score over ``rankings`` (each best first, items unique in it)."""
    fused: dict[K, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return fused

"""Reciprocal rank fusion."""

from __future__ import annotations

import pytest
from contextd.core.rank_fusion import reciprocal_rank_fusion


def test_items_in_both_rankings_win() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "d"]], k=60)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["a"] == pytest.approx(1 / 61)
    assert max(fused, key=fused.__getitem__) == "c"
    assert set(fused) == {"a", "b", "c", "d"}


def test_empty() -> None:
    assert reciprocal_rank_fusion([[], []]) == {}

"""What both memory indexes share: a search ranks by the rarest of its terms within a budget."""

from __future__ import annotations

from contextd.store.memory.index import choose_terms


def test_choose_terms_keeps_the_rarest_within_the_budget() -> None:
    assert choose_terms({"a": 3000, "b": 10, "c": 500, "d": 0}, 1000) == ["b", "c"]
    assert choose_terms({"a": 3000, "b": 5000}, 1000) == ["a"]
    assert choose_terms({}, 1000) == []
    assert choose_terms({"z": 0}, 1000) == []

"""SQLite's memory index: every term of a search quoted in its FTS5 expression."""

from __future__ import annotations

from contextd.store.memory.fts5_index import match_expression


def test_match_expression_quotes_every_term() -> None:
    assert match_expression(["coffee", 'a"b', "NEAR"]) == '"coffee" OR "a""b" OR "NEAR"'

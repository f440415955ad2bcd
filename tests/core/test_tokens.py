"""Counting long texts: the count that never makes a list of tokens gives the same
figures as tiktoken's own encoding, whatever the text holds."""

from __future__ import annotations

import pytest
from contextd.core.tokens import TiktokenTokenizer, TokenizerRegistry
from hypothesis import given, settings
from hypothesis import strategies as st

PIECES = ["hello", " world", "<|endoftext|>", "你好世界", "🙂", "\n\n", "   ", "x", "ab12", "é"]


@pytest.fixture(scope="module")
def tok() -> TiktokenTokenizer:
    found = TokenizerRegistry("cl100k_base").get("cl100k_base")
    assert isinstance(found, TiktokenTokenizer)
    return found


def reference(tok: TiktokenTokenizer, text: str) -> int:
    return len(tok.encoding.encode_ordinary(text))


def test_a_long_text_is_counted_as_tiktoken_encodes_it(tok: TiktokenTokenizer) -> None:
    text = "".join(PIECES) * 20_000
    assert len(text) > tok.max_cached_text
    assert tok.count(text) == reference(tok, text)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=30), min_size=1, max_size=60))
def test_long_texts_of_any_make_up(tok: TiktokenTokenizer, parts: list[str]) -> None:
    text = "".join(parts)
    text = text * (tok.max_cached_text // max(1, len(text)) + 1)
    assert tok.count(text) == reference(tok, text)

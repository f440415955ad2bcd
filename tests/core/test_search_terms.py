"""contextd.core.search_terms: the terms memories are indexed and searched by (pure functions)."""

from __future__ import annotations

import re

import pytest
from contextd.core.search_terms import (
    MAX_QUERY_CHARS,
    MAX_QUERY_TERMS,
    MAX_WORD_CHARS,
    content_hash,
    dedup_key,
    fold_plural,
    index_terms,
    normalize,
    query_terms,
    segments,
)
from contextd.core.search_terms import _segments as _segments  # the general path
from hypothesis import given
from hypothesis import strategies as st

# FTS5's 'ascii' tokenizer splits at ASCII characters other than letters and digits and
# lowercases ASCII: a term free of those passes through it unchanged, as one token.
ONE_ASCII_TOKEN = re.compile(r"^[^\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]+$")


def test_normalize_folds_width_and_case() -> None:
    assert normalize("ＣＯＦＦＥＥ Straße") == "coffee strasse"


def test_chinese_run_gives_every_character_and_every_bigram() -> None:
    assert index_terms("喝咖啡") == ["喝", "咖", "啡", "喝咖", "咖啡"]


def test_chinese_query_looks_up_bigrams_only() -> None:
    assert query_terms("咖啡") == ["咖啡"]
    assert query_terms("喝咖啡") == ["喝咖", "咖啡"]
    assert set(query_terms("喝咖啡")) <= set(index_terms("我每天早上都喝咖啡"))


def test_single_character_query_looks_up_the_character() -> None:
    assert query_terms("猫") == ["猫"]
    assert "猫" in index_terms("我养了一只猫")


def test_english_words_are_lowercased_and_plurals_folded() -> None:
    assert index_terms("I drink Coffee every morning.") == [
        "i",
        "drink",
        "coffee",
        "everi",
        "morning",
    ]
    assert query_terms("COFFEES") == ["coffee"]


def test_stopwords_leave_queries_but_stay_in_the_index() -> None:
    assert query_terms("what do I drink in the morning") == ["drink", "morning"]
    assert "the" in index_terms("the morning")
    # A query made only of stopwords still looks them up.
    assert query_terms("The Who") == ["the", "who"]


def test_mixed_chinese_and_english() -> None:
    assert segments("我用Python写代码") == [
        (True, "我用"),
        (False, "python"),
        (True, "写代码"),
    ]
    terms = index_terms("我用Python写代码")
    assert {"python", "写代", "代码", "我用", "我", "码"} <= set(terms)
    assert query_terms("Python代码") == ["python", "代码"]


def test_letters_and_digits_also_give_their_parts() -> None:
    assert index_terms("iPhone15") == ["iphone15", "iphone", "15"]
    assert set(query_terms("iPhone 15")) <= set(index_terms("我的iPhone15很好用"))


def test_diacritics_of_latin_letters_are_dropped_kana_voicing_is_kept() -> None:
    assert index_terms("Café NAÏVE") == ["cafe", "naive"]
    assert query_terms("cafe") == index_terms("café")
    assert index_terms("が") != index_terms("か")


def test_apostrophes_inside_words_are_dropped() -> None:
    assert index_terms("don't") == ["dont"]
    assert index_terms("the user’s cat") == ["the", "user", "cat"]


def test_korean_and_thai_use_character_bigrams() -> None:
    assert "커피" in query_terms("커피") and "커피" in index_terms("나는 커피를 좋아해요")
    assert set(query_terms("ไทย")) <= set(index_terms("ภาษาไทย"))


@pytest.mark.parametrize(
    ("word", "folded"),
    [
        ("cats", "cat"),
        ("cat", "cat"),
        ("berries", "berri"),
        ("berry", "berri"),
        ("movies", "movi"),
        ("movie", "movi"),
        ("boxes", "box"),
        ("glasses", "glass"),
        ("watches", "watch"),
        ("status", "status"),
        ("analysis", "analysis"),
        ("days", "day"),
        ("keys", "key"),
        ("bus", "bus"),
        ("cafés", "cafés"),  # not ASCII: unchanged (normalization folds it before)
    ],
)
def test_fold_plural(word: str, folded: str) -> None:
    assert fold_plural(word) == folded


@pytest.mark.parametrize("query", ["", "   ", "!!!", "。，、", '"*:()-^+', "🙂🎉", "\x00\t"])
def test_query_without_letters_digits_or_chinese_has_no_terms(query: str) -> None:
    assert query_terms(query) == []


def test_fts_syntax_in_a_query_is_just_words() -> None:
    assert query_terms('coffee* AND "tea" NEAR(milk) -sugar') == [
        "coffee",
        "tea",
        "near",
        "milk",
        "sugar",
    ]


def test_query_terms_are_capped() -> None:
    text = " ".join(f"word{i}x" for i in range(100))
    assert len(query_terms(text)) == MAX_QUERY_TERMS
    long_word = "a" * 500
    assert index_terms(long_word) == ["a" * MAX_WORD_CHARS]
    # Only the beginning of a very long query is read.
    assert query_terms("x" * MAX_QUERY_CHARS + " coffee") == ["x" * MAX_WORD_CHARS]


def test_dedup_key_ignores_case_width_spacing_and_final_full_stop() -> None:
    variants = [
        "I like green tea",
        "  i LIKE   green\ttea.  ",
        "Ｉ ｌｉｋｅ ｇｒｅｅｎ ｔｅａ！",
        "I like green tea . ",
    ]
    assert len({dedup_key(v) for v in variants}) == 1
    assert len({content_hash(v) for v in variants}) == 1
    assert dedup_key("我喜欢喝绿茶。") == dedup_key("我喜欢喝绿茶")


def test_dedup_key_keeps_what_changes_meaning() -> None:
    assert content_hash("I like tea") != content_hash("I like tea?")
    assert content_hash("I like tea") != content_hash("I like teas")
    assert content_hash("我喜欢喝绿茶") != content_hash("我喜欢喝红茶")
    assert re.fullmatch(r"[0-9a-f]{32}", content_hash("x"))


@given(st.text(max_size=200))
def test_every_term_is_one_lowercase_ascii_tokenizer_token(text: str) -> None:
    for term in index_terms(text) + query_terms(text):
        assert ONE_ASCII_TOKEN.match(term), term
        assert term == term.lower()


@given(st.text(max_size=200))
def test_a_text_is_found_by_its_own_query_terms(text: str) -> None:
    assert set(query_terms(text)) <= set(index_terms(text))


_CJK = st.text(alphabet="我你他喝咖啡茶早上每天都猫狗的了一只是在北京上海", min_size=1, max_size=30)


@given(_CJK, st.data())
def test_any_chinese_substring_finds_the_text(text: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(text) - 1))
    end = data.draw(st.integers(start + 1, len(text)))
    assert set(query_terms(text[start:end])) <= set(index_terms("前缀，" + text + "。"))


@given(st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=80))
def test_ascii_fast_path_matches_the_general_segmenter(text: str) -> None:
    folded = normalize(text)
    assert segments(text) == _segments(folded)


@pytest.mark.parametrize(
    ("text", "words"),
    [("Don't stop", ["dont", "stop"]), ("don''t", ["don", "t"]), ("dogs' 'tis", ["dogs", "tis"])],
)
def test_ascii_apostrophes_join_word_parts(text: str, words: list[str]) -> None:
    assert segments(text) == [(False, w) for w in words]

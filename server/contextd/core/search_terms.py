"""Search terms of memory texts: what the full-text index stores and what a query looks for.

Pure text analysis, no I/O. The store's FTS5 table receives these terms already split and
separated by spaces; its tokenizer only stems English words (porter), so this module decides
what a term is, for every language:

- Text is NFKC-normalized and case-folded ("ＣＯＦＦＥＥ" -> "coffee", "Straße" -> "strasse");
  Latin, Greek and Cyrillic letters lose their diacritics ("café" -> "cafe").
- Scripts written without spaces between words (Chinese, Japanese, Korean, Thai, Lao, Khmer,
  Myanmar) cannot be split into words without a dictionary. A run of such characters is
  indexed as every single character AND every overlapping pair of characters (bigram):
  "喝咖啡" -> 喝 咖 啡 喝咖 咖啡. Most Chinese words are two characters, so a two-character
  query such as 咖啡 is one exact bigram lookup, and a longer query is the OR of its bigrams,
  which ranks texts that contain more of them higher. (FTS5's own ``trigram`` tokenizer never
  matches a query shorter than three characters; ``unicode61`` keeps a whole unspaced run as
  one token, so 咖啡 would not match 我每天早上都喝咖啡.)
- Other scripts are split into words at anything that is not a letter, digit or mark; an
  apostrophe inside a word is dropped ("don't" -> "dont"). A word mixing letters and digits
  also yields its parts ("iphone15" -> iphone15 iphone 15), so "iPhone 15" finds it too.
  English plurals fold to one form (``fold_plural``: cats -> cat, berries/berry -> berri),
  a deliberately light stemmer: the porter stemmer of FTS5 also merges words that differ
  (universe/university, new/news) and would hide the indexed form from this module.
- Queries use the same rules, except that an unspaced run of two or more characters looks up
  its bigrams only (single characters of a longer run match far too much to be useful) and
  English function words are dropped unless nothing else is left.

Change any of this and the stored terms no longer match new queries: bump ``TERMS_VERSION``
and rebuild the index (``MemoryRepo.reindex``).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

TERMS_VERSION = 1

# A query looks up at most this many terms, its first ones (the store then keeps the rarest
# of them), and only its first MAX_QUERY_CHARS characters are read: a pasted document costs
# no more than a long question.
MAX_QUERY_TERMS = 64
MAX_QUERY_CHARS = 4000
# Longer words (hashes, base64, URLs glued together) are cut to this many characters.
MAX_WORD_CHARS = 64

# Character classes.
_SEP = 0  # separates terms
_WORD = 1  # letter or digit of a spaced script
_MARK = 2  # combining mark that continues a word (Indic vowel signs, ...)
_IGNORE = 3  # combining diacritic (U+0300-U+036F): dropped, the word goes on
_JOIN = 4  # apostrophe: dropped inside a word, a separator elsewhere
_NGRAM = 5  # character of a script written without spaces

# Code point ranges of scripts written without spaces between words.
_NGRAM_RANGES = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31A0, 0x31FF),  # Bopomofo extended, CJK strokes, Katakana extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x3FFFF),  # CJK extensions B and later
)

_APOSTROPHES = frozenset("'\u2019\u02bc")

# English function words: left out of queries (never out of the index) unless a query has
# nothing else. "what do I drink in the morning" then looks up drink and morning, not
# words that nearly every English memory contains.
_STOPWORDS_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves im ive id ill youre dont doesnt didnt isnt arent wasnt cant
    s t
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


def _classify(ch: str) -> tuple[int, str]:
    cp = ord(ch)
    for low, high in _NGRAM_RANGES:
        if low <= cp <= high:
            return _NGRAM, ch
    if ch in _APOSTROPHES:
        return _JOIN, ""
    category = unicodedata.category(ch)
    if category[0] in "LN":
        if 0xC0 <= cp < 0x530 or 0x1E00 <= cp < 0x2000:  # Latin, Greek, Cyrillic
            base = "".join(
                c for c in unicodedata.normalize("NFD", ch) if not 0x300 <= ord(c) < 0x370
            )
            return _WORD, base or ch
        return _WORD, ch
    if category[0] == "M":
        return (_IGNORE, "") if 0x300 <= cp < 0x370 else (_MARK, ch)
    return _SEP, ""


_CLASSES: dict[str, tuple[int, str]] = {}


def normalize(text: str) -> str:
    """NFKC, then case-folded: the form every term is taken from."""
    # lower() after casefold(): a few scripts (Cherokee) casefold to capitals.
    return unicodedata.normalize("NFKC", text).casefold().lower()


# ASCII has only words, separators and the apostrophe, which joins two word parts.
_ASCII_WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")


def segments(text: str) -> list[tuple[bool, str]]:
    """The text's runs in order: ``(True, run)`` for an unspaced-script run, ``(False, word)``."""
    folded = normalize(text)
    if folded.isascii():  # the common case, in C rather than a loop per character
        return [(False, word.replace("'", "")) for word in _ASCII_WORD.findall(folded)]
    return _segments(folded)


def _segments(folded: str) -> list[tuple[bool, str]]:
    out: list[tuple[bool, str]] = []
    buf: list[str] = []
    kind = _SEP
    joined = False  # an apostrophe followed the current word

    def flush() -> None:
        if buf:
            out.append((kind == _NGRAM, "".join(buf)))
            buf.clear()

    classes = _CLASSES
    for ch in folded:
        info = classes.get(ch)
        if info is None:
            info = classes[ch] = _classify(ch)
        cls, rep = info
        if cls == _WORD:
            if kind != _WORD:
                flush()
                kind = _WORD
            buf.append(rep)
            joined = False
        elif cls == _NGRAM:
            if kind != _NGRAM:
                flush()
                kind = _NGRAM
            buf.append(rep)
            joined = False
        elif cls == _IGNORE:
            continue
        elif cls == _MARK and kind == _WORD and not joined:
            buf.append(rep)
        elif cls == _JOIN and kind == _WORD and not joined:
            joined = True
        else:
            flush()
            kind = _SEP
            joined = False
    flush()
    return out


_DIGIT_SPLIT = re.compile(r"\d+|\D+")
_ES_PLURALS = ("sses", "shes", "ches", "xes", "zzes")
_S_KEPT = ("ss", "us", "is")


def fold_plural(word: str) -> str:
    """English plural and singular to one form, for lowercase ASCII words of 4+ letters.

    -ies -> -i, -sses/-shes/-ches/-xes/-zzes lose "es", other -s (not -ss, -us, -is) lose
    "s"; then a final consonant + y, or -ie, becomes -i, so both forms meet:
    berries/berry -> berri, movies/movie -> movi, boxes/box -> box, cats/cat -> cat.
    Anything else is returned unchanged.
    """
    if len(word) < 4 or not (word.isascii() and word.isalpha()):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "i"
    if word.endswith(_ES_PLURALS):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(_S_KEPT):
        word = word[:-1]
    if word.endswith("ie"):
        return word[:-1]
    if word.endswith("y") and word[-2] not in "aeiouy":
        return word[:-1] + "i"
    return word


def word_terms(word: str) -> list[str]:
    """A word's terms: the word (cut to MAX_WORD_CHARS), plus its letter and digit parts."""
    word = word[:MAX_WORD_CHARS]
    parts = _DIGIT_SPLIT.findall(word)
    if len(parts) > 1:
        return [word, *map(fold_plural, parts)]
    return [fold_plural(word)]


def index_terms(text: str) -> list[str]:
    """Every distinct term of a stored text, in order of first appearance."""
    terms: dict[str, None] = {}
    for unspaced, run in segments(text):
        if unspaced:
            terms.update(dict.fromkeys(run))
            terms.update(dict.fromkeys(run[i : i + 2] for i in range(len(run) - 1)))
        else:
            terms.update(dict.fromkeys(word_terms(run)))
    return list(terms)


def query_terms(text: str, max_terms: int = MAX_QUERY_TERMS) -> list[str]:
    """The distinct terms a query looks up (at most ``max_terms``); [] if it has none."""
    terms: dict[str, None] = {}
    stop: dict[str, None] = {}
    for unspaced, run in segments(text[:MAX_QUERY_CHARS]):
        if unspaced:
            if len(run) == 1:
                terms[run] = None
            else:
                terms.update(dict.fromkeys(run[i : i + 2] for i in range(len(run) - 1)))
        elif run in STOPWORDS:
            stop[run] = None
        else:
            terms.update(dict.fromkeys(word_terms(run)))
    return list(terms or stop)[:max_terms]


_SPACES = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.。!;,、]+$")


def dedup_key(text: str) -> str:
    """The form two texts share when they state the same memory.

    NFKC, case-folded, runs of whitespace collapsed to one space, stripped, and without
    trailing full stops, exclamation marks, commas or semicolons ("I like tea." is "i like
    tea"). Question marks stay: a question is not the statement.
    """
    return _TRAILING.sub("", _SPACES.sub(" ", normalize(text)).strip())


def content_hash(text: str) -> str:
    """The first 128 bits of SHA-256 of ``dedup_key(text)``, 32 hex digits.

    One memory per user and hash. 128 bits keep the unique index small (the full 256-bit
    hex digest made it as large as the memories' text) and still make an accidental
    collision between two of a user's memories practically impossible.
    """
    return hashlib.sha256(dedup_key(text).encode("utf-8")).hexdigest()[:32]

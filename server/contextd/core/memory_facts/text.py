"""Text helpers the fact and summary prompts and the rule fallback share.

Also the lengths every part reads: of a model's answer and of the user's message.
"""

from __future__ import annotations

import re

# A model answer longer than this is not read (a fact list or a summary is short; this is
# runaway output).
MAX_OUTPUT_CHARS = 20_000
# What the prompts and the rule fallback read of the user's message.
MAX_PROMPT_USER_CHARS = 4000

# Control characters and the Unicode line and paragraph separators.
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_FENCE = re.compile(r"\A```[A-Za-z]*[ \t]*\n(?P<body>.*)\n[ \t]*```\Z", re.DOTALL)


def one_line(text: str) -> str:
    """Control characters and line breaks as spaces, runs of whitespace as one, stripped."""
    if CONTROL_CHARS.search(text):
        text = CONTROL_CHARS.sub(" ", text)
    # str.split() splits on exactly what the regex \s matches, and is many times faster.
    return " ".join(text.split())


def shorten(text: str, limit: int) -> str:
    """``text`` on one line, cut to at most ``limit`` characters (an ellipsis marks a cut)."""
    flat = one_line(text)
    if len(flat) <= limit:
        return flat
    return flat[: max(0, limit - 1)].rstrip() + "…"


def unfence(text: str) -> str:
    """The body of a reply that is exactly one Markdown code fence; otherwise the reply."""
    stripped = text.strip()
    match = _FENCE.match(stripped)
    return match.group("body").strip() if match else stripped


_HAN = re.compile("[\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff]")
_KANA = re.compile("[\u3040-\u30ff]")
_HANGUL = re.compile("[\uac00-\ud7af]")
_LATIN = re.compile("[A-Za-z]")


_ASCII_LETTERS = bytes(range(65, 91)) + bytes(range(97, 123))


def script_counts(text: str) -> tuple[int, int, int, int]:
    """Characters of each script: Han, kana, Hangul, ASCII letters."""
    if text.isascii():
        # Most text: no Han, kana or Hangul, and the letters counted without a list of them.
        data = text.encode("ascii")
        return (0, 0, 0, len(data) - len(data.translate(None, _ASCII_LETTERS)))
    return (
        len(_HAN.findall(text)),
        len(_KANA.findall(text)),
        len(_HANGUL.findall(text)),
        len(_LATIN.findall(text)),
    )


def language_hint(text: str) -> str:
    """The language to write facts in, as the prompt names it.

    Chinese, Japanese or Korean when that script carries the text (one such character
    counts as much as three Latin letters, about a word each way); otherwise the prompt
    just asks for the user's own language.
    """
    han, kana, hangul, latin = script_counts(text)
    if kana and (han + kana) * 3 >= latin:
        return "Japanese"
    if hangul and hangul * 3 >= latin:
        return "Korean"
    if han and han * 3 >= latin:
        return "Chinese"
    return "the same language as the user's message"


def is_chinese(text: str) -> bool:
    return language_hint(text) == "Chinese"

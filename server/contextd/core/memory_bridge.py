"""The names a memory search follows to a second memory (a two-hop question).

"What does my sister do?" finds "My sister is called Emily" by its words and meaning; the
answer, "Emily works as a dentist in Leeds", shares neither with the question. The name
in the first memory that the question does not say (Emily) is the bridge: the search
then looks among the memories that mention it (store/memory/hybrid.py).

Pure and deterministic, no model: a name is

- in Latin script, a capitalised word (or a run of them: "New York"), other than a
  sentence's usual openers, first-person words, months and weekdays;
- in Chinese, Japanese or Korean text, the 2 to 4 characters a memory gives as what
  someone is called or is: after 叫, 名叫, 是 (at the end of a clause: "用户的姐姐叫王芳",
  "用户最好的朋友是林峰");
- anything in quotation marks (“Maple”, 「小白」, 《三体》).

A name the question already holds is no bridge (the first hop found by it already).
What is measured on bench/memory_recall.py chose the rest: only the best memory's names
are followed, and only when that memory shares a word with the question (the sister of
"my sister"); then a name's memories that it opens, the three closest to the question
asked of the person (:func:`hop_question`: "What does my sister do?" with "My sister is
called Emily" asks "Emily What does do?"), whose words are about the person and no
longer about the relation, which every memory of hers lacks.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence

from contextd.core.search_terms import index_terms, query_terms

# Names followed per search, from the first hop's best BRIDGE_FROM memories; a name's
# memories looked at (the best by its terms); a name in more than MAX_NAMED of the
# user's memories is a common word (or the user's whole life), not a bridge to one fact.
MAX_NAMES = 2
BRIDGE_FROM = 1
NAMED_LOOKED_AT = 50
MAX_NAMED = 200
# A name's memories put after the memory that named it.
HOPS_PER_NAME = 3
# Capitalised words that open a question and are no names.
_QUESTION_OPENERS = frozenset(
    [
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "how",
        "would",
        "does",
        "do",
        "did",
        "is",
        "are",
        "was",
        "were",
        "could",
        "can",
        "should",
        "has",
        "have",
        "will",
        "name",
        "tell",
        "list",
    ]
)
# One CJK character, or a run of other letters, or any other character.
_WORD = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]|[^\W\d_\u3400-\u4dbf\u4e00-\u9fff]+|\S")

_TOKEN = re.compile(r"[^\W\d_][\w'\u2019-]*|\S")
_POSSESSIVE = re.compile(r"['\u2019]s?$")
_OPEN_QUOTES = '\u201c"\u300c\u300e\u300a\u2018'
_CLOSE_QUOTES = '\u201d"\u300d\u300f\u300b\u2019'
_QUOTED = re.compile(f"[{_OPEN_QUOTES}]([^{_CLOSE_QUOTES}]{{1,40}})[{_CLOSE_QUOTES}]")
_CJK = r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]"
# 是 / 叫 / 名叫, then a name of 2 to 4 characters ending its clause.
_CJK_NAMED = re.compile(rf"(?:名叫|叫|是)({_CJK}{{2,4}})(?=$|[\s，。！？、；：,.!?;:）)])")
# Capitalised words that are no names: sentence openers, first person, months, weekdays.
_NOT_NAMES_TEXT = """
    a an the this that these those there here it its he she they we i i'm i've i'd i'll
    my our your his her their me us you on in at of for to from by with and or but if
    when while after before every each some all last next yesterday today tomorrow
    mr mrs ms dr
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday
"""
_NOT_NAMES = frozenset(_NOT_NAMES_TEXT.split())
_FIRST_PERSON = frozenset(["i", "i'm", "i've", "i'd", "me", "my", "mine", "myself"])
_CJK_CHAR = re.compile(_CJK)


def _latin_names(text: str) -> list[str]:
    """Runs of capitalised words ("Emily", "New York"), broken by any other token."""
    names: list[str] = []
    run: list[str] = []
    for token in [*_TOKEN.findall(text), ""]:
        word = _POSSESSIVE.sub("", token)
        if word[:1].isupper() and word.casefold() not in _NOT_NAMES:
            run.append(word)
            continue
        if run:
            names.append(" ".join(run))
        run = []
    return names


def names_in(text: str) -> list[str]:
    """The names ``text`` mentions, in order of appearance, each once."""
    text = unicodedata.normalize("NFKC", text)
    found = [m.group(1).strip() for m in _QUOTED.finditer(text)]
    found += [m.group(1) for m in _CJK_NAMED.finditer(text)]
    found += _latin_names(text)
    seen: set[str] = set()
    names = []
    for name in found:
        if name and name.casefold() not in seen:
            seen.add(name.casefold())
            names.append(name)
    return names


def question_names(question: str) -> list[str]:
    """The names a question mentions ("Would Melanie enjoy...?": Melanie), its opening
    question word left out: capitalised words and quotations (in Chinese, 是 and 叫 open
    the question's own words: "我姐姐是做什么的")."""
    text = unicodedata.normalize("NFKC", question)
    found = [m.group(1).strip() for m in _QUOTED.finditer(text)] + _latin_names(text)
    names: list[str] = []
    for name in dict.fromkeys(n for n in found if n):
        words = name.split()
        if words[0].casefold() in _QUESTION_OPENERS:
            words = words[1:]
        if words:
            names.append(" ".join(words))
    return names


def without_names(question: str, names: Sequence[str]) -> str:
    """``question`` with ``names`` (and their possessive 's) taken out."""
    for name in names:
        question = re.sub(rf"{re.escape(name)}(?:['\u2019]s?)?", " ", question)
    return " ".join(question.split())


def hop_question(question: str, bridge: str, name: str) -> str:
    """``question`` asked of ``name``: the name, then the question's words that the
    memory that named it (``bridge``) does not hold, first-person words left out ("What
    does my sister do?", "My sister is called Emily." -> "Emily What does do?"; "我姐姐是
    做什么的", "用户的姐姐叫王芳" -> "王芳是做什么")."""
    held = set(index_terms(bridge))
    kept = []
    for word in _WORD.findall(unicodedata.normalize("NFKC", question)):
        terms = set(query_terms(word))
        if (terms and terms <= held) or word.casefold() in _FIRST_PERSON or word == "我":
            continue
        kept.append(word)
    glue = "" if _CJK_CHAR.search(question) else " "
    return glue.join([name, *kept])


def bridge_names(question: str, texts: Sequence[str]) -> list[tuple[str, int]]:
    """Up to ``MAX_NAMES`` (name, index of the text that names it) of ``texts`` (the first
    hop's best memories, best first) that ``question`` does not mention. A question that
    names someone is about them: only a text that names them too leads on ("What does
    Caroline's sister do?": "Caroline's sister is called Nora" leads to Nora; "When did I
    go camping with Jonah?": "I went camping with Priya" leads nowhere)."""
    asked = unicodedata.normalize("NFKC", question).casefold()
    about = [n.casefold() for n in question_names(question)]
    bridges: list[tuple[str, int]] = []
    for index, text in enumerate(texts):
        folded = unicodedata.normalize("NFKC", text).casefold()
        if not all(name in folded for name in about):
            continue
        for name in names_in(text):
            if name.casefold() in asked or any(name == b for b, _ in bridges):
                continue
            bridges.append((name, index))
            if len(bridges) == MAX_NAMES:
                return bridges
    return bridges


def rank_named(
    name: str, mentions: Sequence[tuple[int, str, float]], cosines: Mapping[int, float]
) -> list[int]:
    """The ids of the ``HOPS_PER_NAME`` memories about ``name`` closest to the question:
    of ``mentions`` (id, text, updated_at: memories that mention it), those it opens
    ("Emily works as a dentist", not "On 3 May I went hiking with Emily": the question
    asks about the person, not about the user's time with them), by their cosine with the
    question (``cosines``; one without is left out); ties go to the newer memory."""
    folded = name.casefold()
    scored = [
        (cosines[mid], updated_at, mid)
        for mid, text, updated_at in mentions
        if mid in cosines
        and unicodedata.normalize("NFKC", text).lstrip().casefold().startswith(folded)
    ]
    scored.sort(reverse=True)
    return [mid for _, _, mid in scored[:HOPS_PER_NAME]]

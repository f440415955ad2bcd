"""Facts without a model: first-person statements in the user's message, found by rules,
and which stored memory such a fact replaces."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from contextd.core.memory_facts.facts import (
    DEFAULT_MAX_FACT_CHARS,
    DEFAULT_MAX_FACTS,
    ExistingMemory,
    Fact,
    clean_fact_text,
)
from contextd.core.memory_facts.text import MAX_PROMPT_USER_CHARS, one_line, script_counts
from contextd.core.search_terms import dedup_key

# Kinds of statement. Single-valued kinds: a new statement replaces the old one.
SINGLE_VALUED = frozenset({"name", "residence", "origin", "age", "job", "workplace"})
# Preferences: a statement replaces the opposite one about the same thing.
POLARITY = {"like": 1, "prefer": 1, "dislike": -1}


@dataclass(frozen=True, slots=True)
class Statement:
    """A first-person statement the rules understood: its kind, value and canonical text."""

    kind: str
    value: str
    text: str


_ZH_ADV = r"(?:也|还|都|很|非常|特别|真的|挺|最|一直|比较|蛮|超|好|就|其实|本来)*"
_EN_ADV = r"(?:(?:really|also|just|totally|absolutely|actually|still|do|truly|kind of|kinda)\s+)*"

# (kind, pattern, template). Patterns match a whole clause; {v} is the value, {verb} the
# verb as the user wrote it. Order matters: the first match wins.
_ZH_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (kind, re.compile(pattern), template)
    for kind, pattern, template in (
        ("name", r"我(?:的名字|的姓名|的中文名|的英文名)(?:是|叫)(?P<v>.+)", "我叫{v}"),
        ("name", r"我叫(?P<v>.+)", "我叫{v}"),
        ("name", r"(?:你)?(?:可以)?叫我(?P<v>.+?)(?:就(?:行|好|可以)了?)?", "我叫{v}"),
        ("like", r"我的(?:爱好|兴趣)是(?P<v>.+)", "我的爱好是{v}"),
        (
            "dislike",
            rf"我{_ZH_ADV}(?P<verb>不喜欢|不爱|讨厌|受不了)(?P<v>.+)",
            "我{verb}{v}",
        ),
        ("prefer", rf"我{_ZH_ADV}(?P<verb>更喜欢|更爱|偏好|偏爱|倾向于)(?P<v>.+)", "我{verb}{v}"),
        ("like", rf"我{_ZH_ADV}(?P<verb>喜欢|热爱|爱好|爱)(?P<v>.+)", "我{verb}{v}"),
        ("residence", r"我(?:现在|目前)?(?:住在|家在|生活在|居住在)(?P<v>.+)", "我住在{v}"),
        ("origin", r"我(?:来自|老家在|老家是)(?P<v>.+)", "我来自{v}"),
        ("age", r"我(?:今年)?(?P<v>[0-9０-９一二三四五六七八九十百]{1,4})岁了?", "我今年{v}岁"),
        ("job", r"我(?:的工作是|的职业是)(?P<v>.+)", "我的职业是{v}"),
        ("job", r"我(?:是一名|是一位)(?P<v>.+)", "我是一名{v}"),
        ("workplace", r"我(?:现在|目前)?在(?P<v>.+?)(?:工作|上班)", "我在{v}工作"),
        ("allergy", r"我对(?P<v>.+?)过敏", "我对{v}过敏"),
    )
)

_EN_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE), template)
    for kind, pattern, template in (
        ("name", r"my (?:name is|name's)\s+(?P<v>.+)", "My name is {v}"),
        ("name", r"(?:i am|i'm|im) called\s+(?P<v>.+)", "My name is {v}"),
        ("name", r"(?:you can |please )?call me\s+(?P<v>.+)", "My name is {v}"),
        (
            "dislike",
            rf"i\s+{_EN_ADV}(?P<verb>don't like|do not like|dont like|don't enjoy|"
            r"do not enjoy|hate|dislike|can't stand|cannot stand)\s+(?P<v>.+)",
            "I {verb} {v}",
        ),
        ("prefer", rf"i\s+{_EN_ADV}(?P<verb>prefer)\s+(?P<v>.+)", "I {verb} {v}"),
        ("like", rf"i\s+{_EN_ADV}(?P<verb>like|love|enjoy|adore)\s+(?P<v>.+)", "I {verb} {v}"),
        (
            "residence",
            r"i\s+(?:currently\s+|now\s+|still\s+)?(?:live|reside)\s+in\s+(?P<v>.+)",
            "I live in {v}",
        ),
        ("origin", r"(?:i am|i'm|im|i come)\s+from\s+(?P<v>.+)", "I am from {v}"),
        (
            "age",
            r"(?:i am|i'm|im)\s+(?P<v>\d{1,3})(?:\s+years?\s+old|\s+yrs?\s+old)",
            "I am {v} years old",
        ),
        ("job", r"i\s+work\s+as\s+(?P<v>.+)", "I work as {v}"),
        ("workplace", r"i\s+work\s+(?:at|for)\s+(?P<v>.+)", "I work at {v}"),
        ("allergy", r"(?:i am|i'm|im)\s+allergic\s+to\s+(?P<v>.+)", "I am allergic to {v}"),
    )
)

# Leading words that do not change what the clause says.
_ZH_FILLER = re.compile(
    r"\A(?:嗯+|哦+|啊+|其实|另外|还有|而且|对了|顺便说一下|顺便|话说|不过|所以|总之)\s*"
)
_EN_FILLER = re.compile(
    r"\A(?:well|also|and|actually|btw|by the way|oh|so|ok|okay|hi|hello|hey|anyway|plus"
    r"|fyi|honestly)\b[\s,]*",
    re.IGNORECASE,
)
# Sentences end after these (a full stop only before a space or the end: "3.5", "e.g.x").
_SENTENCE_END = re.compile(
    r"(?<=[。！？!?])|\n+"
    r"|(?<=\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bSt\.)(?<!\bMrs\.)(?<!\bProf\.)(?=\s|\Z)"
)
# Clauses end here: punctuation, and words that start another clause.
_CLAUSE_SPLIT = re.compile(
    r"[，,；;：:、…~～()（）「」『』\"“”]+"
    r"|\s+(?:but|because|although|though|so|while|whereas)\s+"
    r"|\s+and\s+(?=(?:i|i'm|im|my)\b)"
    r"|但是|但|因为|所以|不过|可是|而且|然后|并且",
    re.IGNORECASE,
)
# A clause with one of these asks, it does not state.
_QUESTION_WORDS = re.compile(
    r"什么|啥|谁|哪|怎么|怎样|多少|几个|几岁|为什么|是否|(?:吗|呢|么)\W*\Z"
    r"|\b(?:what|who|whom|whose|where|which|when|why|how)\b",
    re.IGNORECASE,
)
# Trailing words that are not part of the value.
_ZH_TAIL = re.compile(r"(?:了|啦|呀|哦|哈|啊|嘛|呗|的话)+\Z")
_EN_TAIL = re.compile(
    r"(?:\s+(?:too|as well|a lot|very much|so much|a bit|anyway|anymore|any more|though|now"
    r"|lol|haha))+\Z",
    re.IGNORECASE,
)
# Values that say nothing by themselves, or start by pointing elsewhere ("I like your idea").
_EMPTY_VALUES = frozenset(
    {"这", "那", "这个", "那个", "这些", "那些", "这样", "那样", "so", "to", "one"}
)
_ZH_POINTING = ("你", "您", "他", "她", "它", "了", "过", "着")
_EN_POINTING = frozenset(
    {"it", "this", "that", "these", "those", "them", "you", "your", "him", "her", "his"}
)
_EN_NOT_NAMES = frozenset({"later", "back", "tomorrow", "now", "soon", "again", "maybe"})
MAX_NAME_CHARS = 40


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _asks(clause: str) -> bool:
    return bool(_QUESTION_WORDS.search(clause))


def _clean_value(value: str, kind: str) -> str | None:
    v = one_line(value).strip(" \t'\"“”‘’「」")
    v = _ZH_TAIL.sub("", v)
    v = _EN_TAIL.sub("", v).strip()
    v = v.rstrip(".。!！").strip()
    if not v or v.casefold() in _EMPTY_VALUES or _asks(v):
        return None
    words = v.casefold().split()
    if v.startswith(_ZH_POINTING) or words[0] in _EN_POINTING:
        return None
    han, kana, hangul, latin = script_counts(v)
    if han + kana + hangul == 0 and latin < 2 and not v.isdigit():
        return None
    if kind == "name" and (len(v) > MAX_NAME_CHARS or len(words) > 3 or words[0] in _EN_NOT_NAMES):
        return None
    return v


def _statement(clause: str) -> Statement | None:
    text = one_line(clause)
    for _ in range(3):
        stripped = _EN_FILLER.sub("", _ZH_FILLER.sub("", text))
        if stripped == text:
            break
        text = stripped
    if not text or _asks(text):
        return None
    han, kana, hangul, _latin = script_counts(text[:1])
    rules = _ZH_RULES if han + kana + hangul else _EN_RULES
    for kind, pattern, template in rules:
        match = pattern.fullmatch(text)
        if match is None:
            continue
        value = _clean_value(match.group("v"), kind)
        if value is None:
            return None
        verb = match.groupdict().get("verb") or ""
        return Statement(kind, value, template.format(v=value, verb=verb.lower()))
    return None


def parse_statement(text: str) -> Statement | None:
    """The statement a memory text makes, if the rules understand it (used on stored
    memories to find what a new statement replaces)."""
    sentence = one_line(text)
    if sentence.endswith(("?", "？")):
        return None
    return _statement(sentence.rstrip("。.!！"))


def rule_facts(
    user_message: str,
    *,
    max_facts: int = DEFAULT_MAX_FACTS,
    max_chars: int = DEFAULT_MAX_FACT_CHARS,
) -> list[Fact]:
    """First-person statements in the user's message, as facts in a canonical wording.

    A statement must open its clause ("如果我喜欢…" and "what I like is…" are not
    statements); clauses that ask (a question word, 吗/呢 at the end, or the last clause of
    a sentence ending in a question mark) are skipped, and so are values that only point
    elsewhere ("I like it", "我喜欢你的回答").
    """
    facts: list[Fact] = []
    seen: set[str] = set()
    for sentence in _sentences(user_message[:MAX_PROMPT_USER_CHARS]):
        clauses = [c for c in _CLAUSE_SPLIT.split(sentence) if c and c.strip()]
        if sentence.endswith(("?", "？")) and clauses:
            clauses.pop()
        chinese_subject = False
        for clause in clauses:
            statement = _statement(clause)
            if statement is None and chinese_subject and not clause.lstrip().startswith("我"):
                # "我喜欢喝茶，但是不喜欢咖啡": the second clause leaves out its 我.
                statement = _statement("我" + clause.strip())
            chinese_subject = statement is not None and statement.text.startswith("我")
            if statement is None:
                continue
            text = clean_fact_text(statement.text, max_chars)
            if text is None or dedup_key(text) in seen:
                continue
            seen.add(dedup_key(text))
            facts.append(Fact(text))
            if len(facts) >= max_facts:
                return facts
    return facts


def rule_replaces(fact: str, existing: Sequence[ExistingMemory]) -> str:
    """The text of the memory a rule-found fact replaces, "" if none.

    Same single-valued kind with another value (a new name replaces the old one, in either
    language), or the opposite preference about the same thing.
    """
    new = parse_statement(fact)
    if new is None:
        return ""
    for memory in existing:
        old = parse_statement(memory.text)
        if old is None or dedup_key(old.text) == dedup_key(new.text):
            continue
        if new.kind in SINGLE_VALUED and old.kind == new.kind:
            return memory.text
        if (
            new.kind in POLARITY
            and old.kind in POLARITY
            and POLARITY[new.kind] != POLARITY[old.kind]
            and dedup_key(old.value) == dedup_key(new.value)
        ):
            return memory.text
    return ""

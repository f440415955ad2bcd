"""Long, multi-session lives for bench/memory_recall.py: several hundred dated memories per
user, as two years of conversations leave them, and the questions that have one answer
among them. Deterministic: every choice comes from a ``random.Random`` seeded by the
user's name. The material of each language is in bench/_life_en.py and bench/_life_zh.py.

A user's memories:

- one per topic (diet, job, home, pets, health, habits...), some stated twice: an earlier
  value, then a later one in a later session ("I moved to ..."), and the same topic of
  other people ("Oscar has a golden retriever called Maple");
- the people close to them (sister, manager...) by name, and what each person does and
  where, beside as many other named people of the same shape;
- dated events with those people ("On 3 May 2025 I went hiking with Oscar"): the same
  activities with other people and the same people at other activities are the nearby
  memories a question must tell apart.

Questions: ``lexical`` (shares a search term with its memory), ``paraphrase`` (shares
none), ``current`` (asks for a value that changed: the later memory answers), and
``multi-hop`` (needs two memories: "What does my sister do?" needs "My sister is called
Emily" and "Emily works as a dentist in Leeds"; found when both are in the top 5). The
close people's job and town are said in that one fact only.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

Lang = Literal["en", "zh"]
Kind = Literal[
    "lexical",
    "paraphrase",
    "current",
    "multi-hop",
    # of the long conversations (bench/_conversations.py)
    "single-hop",
    "temporal",
    "open-domain",
]
DAYS = 730  # two years of conversations
EVENTS_PER_USER = 250
EVENT_QUESTIONS = 25
OTHER_PEOPLE = 14  # named people beside the close ones
OTHERS_PER_TOPIC = 3  # other people's facts of each topic
ANSWERED_BY_PERSON = ("job", "home")  # topics a person's fact (job, city) also answers


@dataclass(frozen=True)
class Topic:
    key: str
    fact: str  # with {v}, the user's value
    values: tuple[str, ...]
    lexical: str  # questions, {v} allowed
    paraphrase: str
    update: str = ""  # how a later value is stated (the topic changes value)


@dataclass(frozen=True)
class Relation:
    word: str
    fact: str  # with {name}
    what: str  # a question about the person's job (two hops)
    where: str  # a question about the person's city (two hops)


@dataclass(frozen=True)
class Script:
    lang: Lang
    topics: tuple[Topic, ...]
    others: Mapping[str, str]  # topic key -> the fact of another person, with {name}, {v}
    relations: tuple[Relation, ...]
    person: str  # with {name}, {job}, {city}
    names: tuple[str, ...]
    jobs: tuple[str, ...]
    cities: tuple[str, ...]
    event: str  # with {date}, {activity}, {name}
    event_question: str  # with {ask}, {name}
    activities: tuple[tuple[str, str], ...]  # (as told, as asked)
    date: Callable[[int, int, int], str]  # (year, month, day) -> text


@dataclass(frozen=True)
class Fact:
    key: str
    text: str
    day: int  # days after the user's first conversation


@dataclass(frozen=True)
class Question:
    lang: Lang
    kind: Kind
    user: str
    text: str
    answers: tuple[str, ...]  # keys of the memories it needs
    group: str = ""  # the set it belongs to, when not its language's lives

    @property
    def row(self) -> str:
        """The set its results are counted in: its group, else its language."""
        return self.group or self.lang


@dataclass(frozen=True)
class Life:
    user: str
    lang: Lang
    facts: tuple[Fact, ...]
    questions: tuple[Question, ...]
    # The date of Fact.day 0; None: two years before the search (the lives).
    start: datetime.date | None = None


def live(script: Script, user: str) -> Life:
    """Two years of ``user``'s memories and questions, in ``script``'s language."""
    rng = random.Random(f"{script.lang}:{user}")
    facts: list[Fact] = []
    questions: list[Question] = []

    def ask(kind: Kind, text: str, *answers: str) -> None:
        questions.append(Question(script.lang, kind, user, text, answers))

    for topic in script.topics:
        value, earlier = rng.sample(topic.values, 2)
        if topic.update:
            facts.append(Fact(f"{topic.key}-old", topic.fact.format(v=earlier), rng.randrange(300)))
            facts.append(Fact(topic.key, topic.update.format(v=value), rng.randrange(400, DAYS)))
            ask("current", topic.lexical.format(v=value), topic.key)
            ask("current", topic.paraphrase.format(v=value), topic.key)
        else:
            facts.append(Fact(topic.key, topic.fact.format(v=value), rng.randrange(DAYS)))
            ask("lexical", topic.lexical.format(v=value), topic.key)
            ask("paraphrase", topic.paraphrase.format(v=value), topic.key)

    people = rng.sample(script.names, len(script.relations) + OTHER_PEOPLE)
    close = people[: len(script.relations)]
    for topic in script.topics:
        names = rng.sample(people, OTHERS_PER_TOPIC)
        if topic.key in ANSWERED_BY_PERSON:
            # A close person's job or home is said once, in the fact the two-hop
            # questions need: a second job or town of theirs would be another answer.
            # (Swapped for someone else, the random draws stay those of every other fact.)
            others = iter(n for n in people[len(close) :] if n not in names)
            names = [next(others) if n in close else n for n in names]
        for name in names:
            text = script.others[topic.key].format(name=name, v=rng.choice(topic.values))
            facts.append(Fact(f"{topic.key} of {name}", text, rng.randrange(DAYS)))
    for name in people:
        job, city = rng.choice(script.jobs), rng.choice(script.cities)
        facts.append(Fact(f"person {name}", script.person.format(name=name, job=job, city=city),
                          rng.randrange(DAYS)))  # fmt: skip
    for relation, name in zip(script.relations, people, strict=False):
        facts.append(Fact(f"rel {relation.word}", relation.fact.format(name=name),
                          rng.randrange(DAYS)))  # fmt: skip
        ask("multi-hop", relation.what, f"rel {relation.word}", f"person {name}")
        ask("multi-hop", relation.where, f"rel {relation.word}", f"person {name}")

    pairs = [(a, n) for a in range(len(script.activities)) for n in people]
    events = rng.sample(pairs, EVENTS_PER_USER)
    for activity, name in events:
        day = rng.randrange(DAYS)
        told, _ = script.activities[activity]
        text = script.event.format(date=_date(script, day), activity=told, name=name)
        facts.append(Fact(f"event {activity} {name}", text, day))
    for activity, name in rng.sample(events, EVENT_QUESTIONS):
        _, asked = script.activities[activity]
        ask("lexical", script.event_question.format(ask=asked, name=name),
            f"event {activity} {name}")  # fmt: skip
    return Life(user, script.lang, tuple(facts), tuple(questions))


def _date(script: Script, day: int) -> str:
    """The calendar date of ``day``, the first conversation being on 1 January 2025."""
    month_days = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
    year, rest = 2025 + day // 365, day % 365
    month = 0
    while rest >= month_days[month]:
        rest -= month_days[month]
        month += 1
    return script.date(year, month + 1, rest + 1)

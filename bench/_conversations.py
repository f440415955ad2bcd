"""Long conversations between two people for bench/memory_recall.py: many dated sessions,
the facts an extraction step writes down from each ("Caroline went hiking at Mount
Rainier on 8 May 2023."), and questions of four kinds. Deterministic: every choice comes
from a ``random.Random`` seeded by the conversation's number; the English material is in
bench/_convo_en.py.

A conversation's memories, all of one user (as a host stores what it extracted):

- each speaker's job and home town; two relatives or friends by name ("Caroline's
  younger sister is called Nora."), and what each of them does and where ("Nora works as
  a pharmacist in Denver.", which does not name the speaker);
- three pastimes each (one of them, in half the conversations, shared by both), said
  once and mentioned again in later sessions;
- one or two events per speaker and session, dated either by the session's date ("on 8
  May 2023") or by words relative to it ("last weekend"), and small talk that answers
  nothing asked: every fact names its speaker, so a name alone tells nothing apart.

Each memory is dated by its session. Questions:

- ``single-hop``: one fact answers it (a job, a town, a pastime's detail);
- ``multi-hop``: two facts (a relative's job needs the relation and the relative's own
  fact; the pastime both speakers share needs both of theirs);
- ``temporal``: "When did Caroline go hiking at Mount Rainier?" (the event's fact, whose
  date may be only its session's), and "Where did Caroline hike in May 2023?" (the event
  of that month, which may not name the month);
- ``open-domain``: an inference from a fact that shares none of its words but the
  speaker's name ("Would Melanie enjoy a chamber music concert?" for "Melanie has been
  learning to play the violin for two years.").
"""

from __future__ import annotations

import datetime
import random

import _convo_en as en
from _recall_life import Fact, Kind, Life, Question

CONVERSATIONS = 10
SESSIONS = (26, 34)  # sessions per conversation, at least and at most
GAP_DAYS = (4, 21)  # days between sessions
EPOCH = datetime.date(2022, 1, 1)  # day 0 of Fact.day
GROUP = "en conversations"
RELATIVES_PER_SPEAKER = 2
HOBBIES_PER_SPEAKER = 3
WHEN_ASKED = 0.3  # share of events asked about with "when"
MONTH_ASKED = 0.3  # share of a month's only event of its kind asked about by the month
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip


def date_text(day: datetime.date) -> str:
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


class _Conversation:
    def __init__(self, number: int) -> None:
        self.rng = random.Random(f"conversation:{number}")
        self.user = f"conversation-{number:02d}"
        self.facts: list[Fact] = []
        self.questions: list[Question] = []
        self.texts: set[str] = set()
        start = EPOCH + datetime.timedelta(days=self.rng.randrange(365))
        self.sessions = [start]
        for _ in range(self.rng.randint(*SESSIONS) - 1):
            gap = self.rng.randint(*GAP_DAYS)
            self.sessions.append(self.sessions[-1] + datetime.timedelta(days=gap))

    def fact(self, key: str, text: str, session: int) -> bool:
        """Store ``text`` as said in ``session``; False when that text is already stored."""
        if text in self.texts:
            return False
        self.texts.add(text)
        day = (self.sessions[session] - EPOCH).days
        self.facts.append(Fact(f"{self.user} {key}", text, day))
        return True

    def ask(self, kind: Kind, text: str, *keys: str) -> None:
        answers = tuple(f"{self.user} {k}" for k in keys)
        self.questions.append(Question("en", kind, self.user, text, answers, GROUP))

    def session(self, earliest: int = 0) -> int:
        return self.rng.randrange(earliest, len(self.sessions))


def conversation(number: int) -> Life:
    c = _Conversation(number)
    rng = c.rng
    speakers = rng.sample(en.NAMES, 2)
    relatives = iter(rng.sample(en.RELATIVE_NAMES, 2 * RELATIVES_PER_SPEAKER))
    cities = rng.sample(en.CITIES, len(en.CITIES))
    for i, p in enumerate(speakers):
        job, city = rng.choice(en.JOBS), cities[i]
        for n, (fact, question) in enumerate(en.PROFILE):
            c.fact(f"{p} profile {n}", fact.format(p=p, job=job, city=city), c.session())
            c.ask("single-hop", question.format(p=p), f"{p} profile {n}")
        for relation in rng.sample(en.RELATIONS, RELATIVES_PER_SPEAKER):
            name = next(relatives)
            rel, person = f"{p} {relation.word}", f"person {name}"
            c.fact(rel, relation.fact.format(p=p, name=name), c.session())
            c.fact(
                person,
                en.RELATIVE.format(name=name, job=rng.choice(en.JOBS), city=rng.choice(cities[2:])),
                c.session(),
            )
            c.ask("multi-hop", relation.what.format(p=p), rel, person)
            c.ask("multi-hop", relation.where.format(p=p), rel, person)
    _hobbies(c, speakers)
    _sessions(c, speakers)
    return Life(c.user, "en", tuple(c.facts), tuple(c.questions), start=EPOCH)


def _hobbies(c: _Conversation, speakers: list[str]) -> None:
    rng = c.rng
    picked = rng.sample(range(len(en.HOBBIES)), 2 * HOBBIES_PER_SPEAKER)
    chosen = [picked[:HOBBIES_PER_SPEAKER], picked[HOBBIES_PER_SPEAKER:]]
    shared = rng.random() < 0.5
    if shared:
        chosen[1][0] = chosen[0][0]
    for p, hobbies in zip(speakers, chosen, strict=True):
        for h in hobbies:
            hobby = en.HOBBIES[h]
            x = rng.choice(hobby.details)
            key = f"{p} hobby {h}"
            first = c.session(0) if rng.random() < 0.5 else rng.randrange(len(c.sessions) // 2)
            c.fact(key, hobby.fact.format(p=p, x=x), first)
            for n, later in enumerate(hobby.progress):
                if first + 1 < len(c.sessions):
                    c.fact(f"{key} again {n}", later.format(p=p, x=x), c.session(first + 1))
            c.ask("single-hop", hobby.single.format(p=p), key)
            c.ask("open-domain", hobby.open.format(p=p), key)
    if shared:
        h = chosen[0][0]
        a, b = speakers
        c.ask("multi-hop", f"Which pastime do {a} and {b} have in common?",
              f"{a} hobby {h}", f"{b} hobby {h}")  # fmt: skip


def _sessions(c: _Conversation, speakers: list[str]) -> None:
    """Each session's events and small talk; the temporal questions about the events."""
    rng = c.rng
    done: set[tuple[str, int, str]] = set()
    by_month: dict[tuple[str, int, int, int], list[str]] = {}
    events: list[tuple[str, int, str, int]] = []
    for s, day in enumerate(c.sessions):
        for p in speakers:
            other = speakers[1] if p == speakers[0] else speakers[0]
            for _ in range(rng.randint(1, 3)):
                a = rng.randrange(len(en.ACTIVITIES))
                activity = en.ACTIVITIES[a]
                x = rng.choice(activity.details)
                if (p, a, x) in done:
                    continue
                done.add((p, a, x))
                if rng.random() < 0.5:
                    when = f"on {date_text(day)}"
                else:
                    when = rng.choice(en.RELATIVE_WHEN)
                key = f"{p} event {a} {x}"
                c.fact(key, rng.choice(activity.told).format(p=p, x=x, when=when), s)
                events.append((p, a, x, s))
                by_month.setdefault((p, a, day.year, day.month), []).append(key)
            for _ in range(rng.randint(2, 4)):
                if rng.random() < 0.3:
                    talk = rng.choice(en.MOODS).format(p=p, q=other)
                else:
                    talk = rng.choice(en.TALK).format(p=p, q=other, t=rng.choice(en.TALK_TOPICS))
                c.fact(f"{p} talk {s} {len(c.facts)}", talk, s)
    for p, a, x, s in events:
        activity = en.ACTIVITIES[a]
        key = f"{p} event {a} {x}"
        if rng.random() < WHEN_ASKED:
            when = activity.when if rng.random() < 0.5 else activity.reworded
            c.ask("temporal", when.format(p=p, x=x), key)
        day = c.sessions[s]
        if by_month[(p, a, day.year, day.month)] == [key] and rng.random() < MONTH_ASKED:
            month = f"{MONTHS[day.month - 1]} {day.year}"
            c.ask("temporal", activity.which.format(p=p, month=month), key)
    for p in speakers:  # "which two ...": every event of a kind the person had twice
        for a, activity in enumerate(en.ACTIVITIES):
            keys = [f"{p} event {a} {x}" for q, b, x, _ in events if (q, b) == (p, a)]
            if len(keys) == 2:
                c.ask("multi-hop", activity.every.format(p=p), *keys)
            elif len(keys) == 1:  # the only one: asked without its time
                c.ask("single-hop", activity.only.format(p=p), *keys)


def conversations() -> list[Life]:
    return [conversation(n) for n in range(1, CONVERSATIONS + 1)]

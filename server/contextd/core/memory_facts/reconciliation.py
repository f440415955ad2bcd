"""What becomes of each new fact given the user's related memories: added, restated or
replacing one of them.

By text: equal texts are the same memory, and a fact replaces the memory it names. By
meaning, when memories have vectors (``closest``: each fact's nearest memory and their
cosine), only where the text rules leave the fact alone:

* a fact at least ``duplicate_at`` close to a memory says the same thing in other words
  and only restates it (it is not stored twice), unless the rules read both as the same
  kind of statement with different values ("I have three kids", "I have two kids" are
  that close: cosine alone cannot tell a rewording from a new value);
* a first-person fact at least ``same_subject_at`` close to a memory that states a
  single-valued fact (where the user lives, their job, name, age...), and that is no
  statement of another kind, gives that subject a new value ("I moved to Porto" after
  "I live in Lisbon"): it replaces the memory. First person only: "My sister lives in
  Porto" is as close to "I live in Lisbon" as "I moved to Porto" is.

bench/README.md gives the cosines these rules and their default thresholds come from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from contextd.core.memory_facts.facts import ExistingMemory, Fact
from contextd.core.memory_facts.rules import SINGLE_VALUED, parse_statement
from contextd.core.search_terms import dedup_key

# A fact about the user themselves: "I ...", "I'm ...", "我..." (not "我的妹妹...", nor
# "我妹妹..." or "我丈夫...": Chinese often leaves 的 out before family and friends).
_FIRST_PERSON = re.compile(
    r"\s*(?:(?:i|i'm|im|i've|i'd)\b"
    r"|我(?!的|们的|[姐妹哥弟爸妈父母儿女妻夫]|丈夫|太太|老公|老婆|先生|孩子|朋友|同事|领导|老板))",
    re.IGNORECASE,
)


class Action(StrEnum):
    ADD = "add"  # a new memory
    RESTATE = "restate"  # the user already has it: stored again, only its recency changes
    UPDATE = "update"  # replaces ``target``; the old text goes to the memory history


@dataclass(frozen=True, slots=True)
class MeaningThresholds:
    """Cosines of a fact and a memory: the same fact in other words, the same subject."""

    duplicate_at: float
    same_subject_at: float


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    fact: Fact
    target: ExistingMemory | None = None


def reconcile(
    facts: Sequence[Fact],
    existing: Sequence[ExistingMemory],
    closest: Mapping[str, tuple[ExistingMemory, float]] | None = None,
    thresholds: MeaningThresholds | None = None,
) -> list[Decision]:
    """What to do with each fact, given the related memories the extraction saw.

    Equal texts (``search_terms.dedup_key``) are the same memory. ``replaces`` must name
    one of ``existing``; each of them is replaced at most once, and a fact that names
    nothing known is added as new, unless ``closest`` (fact text -> its nearest memory and
    their cosine) and ``thresholds`` find it by meaning (see the module doc).
    """
    by_key: dict[str, ExistingMemory] = {}
    for memory in existing:
        by_key.setdefault(dedup_key(memory.text), memory)
    decisions: list[Decision] = []
    seen: set[str] = set()
    replaced: set[int] = set()
    for fact in facts:
        key = dedup_key(fact.text)
        if not key or key in seen:
            continue
        seen.add(key)
        same = by_key.get(key)
        if same is not None:
            decisions.append(Decision(Action.RESTATE, fact, same))
            continue
        target = by_key.get(dedup_key(fact.replaces)) if fact.replaces else None
        near = closest.get(fact.text) if closest and thresholds else None
        if target is None and near is not None and thresholds is not None:
            memory, cosine = near
            if cosine >= thresholds.duplicate_at and not _other_values(fact.text, memory.text):
                decisions.append(Decision(Action.RESTATE, fact, memory))
                continue
            if cosine >= thresholds.same_subject_at and new_value_of(fact.text, memory.text):
                target = memory
        if target is not None and target.id not in replaced:
            replaced.add(target.id)
            decisions.append(Decision(Action.UPDATE, fact, target))
            continue
        decisions.append(Decision(Action.ADD, fact))
    return decisions


def new_value_of(fact: str, memory: str) -> bool:
    """Whether ``fact``, close in meaning to ``memory``, can give its subject a new value:
    the memory states a single-valued fact, the fact speaks of the user in the first
    person and is no statement of another kind (nor the same value)."""
    old = parse_statement(memory)
    if old is None or old.kind not in SINGLE_VALUED or not _FIRST_PERSON.match(fact):
        return False
    new = parse_statement(fact)
    return new is None or _other_values(fact, memory)


def _other_values(fact: str, memory: str) -> bool:
    """The rules read both as the same kind of statement, with different values."""
    new, old = parse_statement(fact), parse_statement(memory)
    return (
        new is not None
        and old is not None
        and new.kind == old.kind
        and dedup_key(new.value) != dedup_key(old.value)
    )

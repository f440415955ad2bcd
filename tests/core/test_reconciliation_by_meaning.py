"""reconcile with each fact's nearest memory by meaning (its cosine given)."""

from __future__ import annotations

import pytest
from contextd.core.memory_facts.facts import ExistingMemory, Fact
from contextd.core.memory_facts.reconciliation import Action, MeaningThresholds, reconcile

THRESHOLDS = MeaningThresholds(duplicate_at=0.96, same_subject_at=0.55)
LISBON = ExistingMemory(1, "I live in Lisbon")
KIDS = ExistingMemory(2, "I have two kids")
AGE = ExistingMemory(3, "I am 30 years old")
NAME = ExistingMemory(4, "My name is Robert")
TEA = ExistingMemory(5, "I like tea")


def _one(fact: str, memory: ExistingMemory, cosine: float) -> tuple[Action, int | None]:
    [decision] = reconcile([Fact(fact)], [memory], {fact: (memory, cosine)}, THRESHOLDS)
    return decision.action, decision.target.id if decision.target else None


@pytest.mark.parametrize(
    ("fact", "memory", "cosine", "expected"),
    [
        # Cosines as all-MiniLM-L6-v2 gives them (bench/README.md).
        ("I am a vegetarian", ExistingMemory(9, "I am vegetarian"), 0.99, (Action.RESTATE, 9)),
        ("I have three kids", KIDS, 0.93, (Action.ADD, None)),  # same shape, other value
        ("I am 31 years old", AGE, 0.97, (Action.UPDATE, 3)),  # close, but a new value
        ("I moved to Porto", LISBON, 0.61, (Action.UPDATE, 1)),
        ("I visited Porto last year", LISBON, 0.50, (Action.ADD, None)),
        ("My sister lives in Porto", LISBON, 0.59, (Action.ADD, None)),  # not about the user
        ("My cat is named Robert", NAME, 0.76, (Action.ADD, None)),
        ("I love the food in Lisbon", LISBON, 0.70, (Action.ADD, None)),  # another kind
        ("I like coffee", TEA, 0.74, (Action.ADD, None)),  # preferences are not single-valued
    ],
)
def test_by_meaning(
    fact: str, memory: ExistingMemory, cosine: float, expected: tuple[Action, int | None]
) -> None:
    assert _one(fact, memory, cosine) == expected


def test_a_replacement_named_by_text_wins() -> None:
    fact = Fact("I live in Porto", replaces="I live in Lisbon")
    other = ExistingMemory(7, "I live in Lisbon, Portugal")
    [decision] = reconcile([fact], [LISBON, other], {fact.text: (other, 0.99)}, THRESHOLDS)
    assert (decision.action, decision.target) == (Action.UPDATE, LISBON)


def test_without_thresholds_nothing_by_meaning() -> None:
    closest = {"I moved to Porto": (LISBON, 0.9)}
    [decision] = reconcile([Fact("I moved to Porto")], [LISBON], closest)
    assert decision.action is Action.ADD


@pytest.mark.parametrize(
    ("fact", "memory", "expected"),
    [
        ("我搬到了杭州", ExistingMemory(11, "我住在上海"), (Action.UPDATE, 11)),
        ("我现在当老师了", ExistingMemory(12, "我是一名护士"), (Action.UPDATE, 12)),
        # Family and friends without 的 are not the user: nothing of the user's replaced.
        ("我丈夫是护士", ExistingMemory(12, "我是一名护士"), (Action.ADD, None)),
        ("我姐姐住在杭州", ExistingMemory(11, "我住在上海"), (Action.ADD, None)),
        ("我的姐姐住在杭州", ExistingMemory(11, "我住在上海"), (Action.ADD, None)),
    ],
)
def test_chinese_facts_about_the_user_only_replace(
    fact: str, memory: ExistingMemory, expected: tuple[Action, int | None]
) -> None:
    assert _one(fact, memory, 0.80) == expected

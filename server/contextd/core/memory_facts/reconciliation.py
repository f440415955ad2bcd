"""What becomes of each new fact given the user's related memories: added, restated or
replacing one of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from contextd.core.memory_facts.facts import ExistingMemory, Fact
from contextd.core.search_terms import dedup_key


class Action(StrEnum):
    ADD = "add"  # a new memory
    RESTATE = "restate"  # the user already has it: stored again, only its recency changes
    UPDATE = "update"  # replaces ``target``; the old text goes to the memory history


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    fact: Fact
    target: ExistingMemory | None = None


def reconcile(facts: Sequence[Fact], existing: Sequence[ExistingMemory]) -> list[Decision]:
    """What to do with each fact, given the related memories the extraction saw.

    Equal texts (``search_terms.dedup_key``) are the same memory. ``replaces`` must name
    one of ``existing``; each of them is replaced at most once, and a fact that names
    nothing known is added as new.
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
        if target is not None and target.id not in replaced:
            replaced.add(target.id)
            decisions.append(Decision(Action.UPDATE, fact, target))
            continue
        decisions.append(Decision(Action.ADD, fact))
    return decisions

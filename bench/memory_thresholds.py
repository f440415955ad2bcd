"""Reconciliation thresholds of the local model: which cosine of a new fact and a stored
memory says "the same fact in other words", and which "a new value of the same subject"?

The pairs (bench/_threshold_pairs.py, English and Chinese: duplicates, new values of a
single-valued fact, facts of the same shape with another value, related facts) are
embedded with the local model as memories are. Printed: the cosines of each group, then
what reconciliation after a turn (core/memory_facts/reconciliation.py, with its text rules)
decides for every pair, with the model's thresholds and over a grid of others. A wrong
restatement or replacement loses a true fact, a missed one only keeps a stale fact beside
the new one: the thresholds are the ones with no loss and the most right decisions.

Target: no pair of another fact restated or replaced, with the provider's thresholds.
The RESULT ratio is the number of such pairs (facts lost); the right decisions are
printed beside it.
Run: ``python bench/memory_thresholds.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys

from _common import machine_note, print_table, result_line
from _threshold_pairs import GROUPS, PAIRS, Group
from contextd.core.memory_facts.facts import ExistingMemory, Fact
from contextd.core.memory_facts.reconciliation import Action, MeaningThresholds, reconcile
from contextd.providers.local_embeddings import (
    DEFAULT_LOCAL_MODEL,
    PACKAGED_MODELS,
    LocalEmbedder,
)

NAME = "memory_thresholds"
RIGHT: dict[Group, Action] = {
    "duplicate": Action.RESTATE,
    "new value": Action.UPDATE,
    "same shape": Action.ADD,
    "related": Action.ADD,
}
Scored = tuple[str, Group, str, str, float]  # lang, group, fact, memory, cosine


async def cosines(embedder: LocalEmbedder) -> list[Scored]:
    scored: list[Scored] = []
    for lang, groups in PAIRS.items():
        for group, pairs in groups.items():
            texts = [t for pair in pairs for t in pair]
            vectors = await embedder.embed(texts, "document")
            for i, (fact, memory) in enumerate(pairs):
                a, b = vectors[2 * i], vectors[2 * i + 1]
                cosine = sum(x * y for x, y in zip(a, b, strict=True))
                scored.append((lang, group, fact, memory, cosine))
    return scored


def decide(pair: Scored, thresholds: MeaningThresholds) -> Action:
    _, _, fact, memory, cosine = pair
    stored = ExistingMemory(1, memory)
    (decision,) = reconcile([Fact(fact)], [], {fact: (stored, cosine)}, thresholds)
    return decision.action


def outcome(pairs: list[Scored], thresholds: MeaningThresholds) -> tuple[int, int]:
    """(right decisions, facts lost: another fact restated or replaced)."""
    right = lost = 0
    for pair in pairs:
        action = decide(pair, thresholds)
        right += action == RIGHT[pair[1]]
        lost += pair[1] in ("same shape", "related") and action != Action.ADD
    return right, lost


def cosine_table(pairs: list[Scored]) -> None:
    rows = []
    for lang in PAIRS:
        for group in GROUPS:
            mine = sorted((p for p in pairs if p[0] == lang and p[1] == group), key=lambda p: p[4])
            values = [p[4] for p in mine]
            top = mine[-1]
            rows.append([
                lang, group, str(len(mine)),
                f"{values[0]:.2f} / {statistics.median(values):.2f} / {values[-1]:.2f}",
                f"{top[2]} / {top[3]} {top[4]:.2f}",
            ])  # fmt: skip
    print("\ncosine of a new fact and a stored memory, per group")
    print_table(["lang", "group", "pairs", "min / median / max", "closest pair"], rows)


async def run() -> int:
    print(machine_note(), flush=True)
    embedder = LocalEmbedder()
    try:
        pairs = await cosines(embedder)
    finally:
        await embedder.aclose()
    cosine_table(pairs)
    grid = []
    for duplicate in (0.80, 0.84, 0.86, 0.88, 0.90, 0.92, 0.94, 0.96, 0.98):
        for same in (0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70, 0.75):
            right, lost = outcome(pairs, MeaningThresholds(duplicate, same))
            grid.append((lost, -right, -duplicate, same))
    grid.sort()
    rows = [[f"{-d:.2f}", f"{s:.2f}", str(-r), str(lost)] for lost, r, d, s in grid[:5]]
    print(f"\nreconciliation of all {len(pairs)} pairs: the best thresholds of the grid")
    print_table(["duplicate at", "same subject at", "right", "facts lost"], rows)

    packaged = PACKAGED_MODELS[DEFAULT_LOCAL_MODEL]
    mine = MeaningThresholds(packaged.duplicate_similarity, packaged.same_subject_similarity)
    rows = []
    for lang in PAIRS:
        for group in GROUPS:
            chosen = [p for p in pairs if p[0] == lang and p[1] == group]
            actions = [decide(p, mine) for p in chosen]
            rows.append([lang, group, *(str(actions.count(a)) for a in Action)])
    print(
        f"\n{DEFAULT_LOCAL_MODEL}: duplicate at {mine.duplicate_at:g}, "
        f"same subject at {mine.same_subject_at:g}; decisions per group"
    )
    print_table(["lang", "group", *(a.value for a in Action)], rows)
    right, lost = outcome(pairs, mine)
    print(f"right decisions: {right} of {len(pairs)}; facts lost: {lost}")
    print(result_line(NAME, lost, 0, lost == 0))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="the same run (it is quick)")
    parser.parse_args()
    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())

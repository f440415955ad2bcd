"""The budget rule's one kernel: keep history from the newest message back while it fits.

History is kept newest first, a tool call and its results as one unit, until the
next older unit would not fit; that unit and everything older is dropped, even if a
smaller older message would still fit. Tokens are counted only for what the kernel
looks at, so the cost follows what is kept, not the history length.

Two forms of the same rule: ``fit_units`` for the repaired units of the general
build, and ``fit_newest`` for a plain history (every message a unit of its own,
nothing to repair).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from contextd.core.messages import ChatMessage
from contextd.core.pipeline import Entry, Unit
from contextd.core.tokens import Tokenizer, message_tokens


@dataclass(slots=True)
class KeptHistory:
    """History kept so far with its token counts, newest message first."""

    entries: list[Entry] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)

    def add(self, unit: Unit, counts: list[int]) -> None:
        if len(unit) == 1:
            self.entries.append(unit[0])
            self.tokens.append(counts[0])
        else:
            self.entries.extend(reversed(unit))
            self.tokens.extend(reversed(counts))

    def oldest_first(self) -> tuple[list[Entry], list[int]]:
        self.entries.reverse()
        self.tokens.reverse()
        return self.entries, self.tokens


def unit_costs(unit: Unit, known: Sequence[int] | None, tok: Tokenizer) -> list[int]:
    """Token counts of a unit's messages: ``known`` by history index when given (a stored
    session keeps them), else counted with ``tok``."""
    # Most units are one message: no comprehension for them (on CPython 3.11 each one
    # makes a function and calls it), and message_tokens inlined for a text.
    if len(unit) == 1:
        index, message = unit[0]
        if known is not None:
            return [known[index]]
        if not message.tool_calls and not message.parts:
            return [tok.message_overhead + tok.count(message.content)]
        return [message_tokens(message, tok)]
    if known is not None:
        return [known[i] for i, _ in unit]
    return [message_tokens(m, tok) for _, m in unit]


def fit_units(
    units: Iterator[Unit],
    available: int,
    known: Sequence[int] | None,
    tok: Tokenizer,
    kept: KeptHistory,
) -> int:
    """Add to ``kept`` the newest units that fit in ``available`` tokens (counted as
    ``unit_costs`` counts them); return the end of the index range dropped for the
    budget (0 when nothing was)."""
    for unit in units:
        counts = unit_costs(unit, known, tok)
        cost = sum(counts)
        if cost > available:
            budget_end = unit[-1][0] + 1
            # Older units are only classified by the pipeline, never tokenized.
            for _ in units:
                pass
            return budget_end
        available -= cost
        kept.add(unit, counts)
    return 0


def fit_newest(
    history: Sequence[ChatMessage], available: int, tok: Tokenizer
) -> tuple[int, list[int]]:
    """``fit_units`` for a plain history: no units, no repairs, one loop over the texts
    from the newest back, read only as far as they fit. Returns the index of the oldest
    kept message and the kept messages' token counts, oldest first."""
    costs: list[int] = []
    add = costs.append
    known, count, overhead = tok.known_counts.get, tok.count, tok.message_overhead
    start = len(history)
    while start:
        text = history[start - 1].content
        tokens = known(text)
        cost = overhead + (count(text) if tokens is None else tokens)
        if cost > available:
            break
        available -= cost
        add(cost)
        start -= 1
    costs.reverse()
    return start, costs

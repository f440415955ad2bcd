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


@dataclass(slots=True)
class UnitCosts:
    """Token counts of a unit's messages: ``known`` by history index when given (a stored
    session keeps them), else counted with ``tokenizer``."""

    tokenizer: Tokenizer
    known: Sequence[int] | None = None

    def of(self, unit: Unit) -> list[int]:
        known = self.known
        if known is not None:
            return [known[i] for i, _ in unit]
        tok = self.tokenizer
        if len(unit) == 1:
            message = unit[0][1]
            if not message.tool_calls and not message.parts:
                # message_tokens, inlined: once per message kept
                return [tok.message_overhead + tok.count(message.content)]
        return [message_tokens(m, tok) for _, m in unit]


def fit_units(units: Iterator[Unit], available: int, costs: UnitCosts, kept: KeptHistory) -> int:
    """Add to ``kept`` the newest units that fit in ``available`` tokens; return the end of
    the index range dropped for the budget (0 when nothing was)."""
    cost_of = costs.of
    for unit in units:
        counts = cost_of(unit)
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

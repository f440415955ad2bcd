"""Which old tool results are cleared: the history replayed, message by message.

A clearing step happens only at a *trigger crossing*: where the history so far, with
the steps before applied, is over ``clear_trigger_tokens``, or holds more tool results
not yet cleared than ``clear_trigger_tool_uses``. It clears the oldest results that may
go (not among the newest ``keep_tool_results``, not of the newest step, not of an
excluded tool) until it frees at least ``clear_at_least_tokens`` and brings the history
back under the token trigger, as far as those results allow; a step the tool-use
trigger started clears every result that may go, so that the next one waits until as
many new results have come. A step that cannot free ``clear_at_least_tokens`` does not
happen. Steps are looked for where a model request can
be made: after every message that no tool result follows.

Replaying from the first message makes the cleared set a function of the history alone:
a longer history replays the same steps first, so the set only grows, and only where a
new step happens. Between steps every message keeps its bytes and a prompt cache keeps
hitting; no state is stored. The replay needs every message's tokens, which a stored
session keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextd.core.editing.settings import EditingSettings


@dataclass(frozen=True, slots=True)
class Candidate:
    """A tool result at ``index`` that answers the call at ``call_index``; ``saving``:
    the tokens clearing it frees (its call's arguments included, when those go too);
    ``excluded``: its tool's results are never cleared."""

    index: int
    call_index: int
    saving: int
    excluded: bool = False


@dataclass(frozen=True, slots=True)
class Cleared:
    """The results cleared (history indexes, oldest first), and those of them the step at
    the history's end cleared: the ones a request with this history is the first to see
    cleared."""

    indexes: list[int]
    newest_step: list[int]


def plan_clearing(
    live: Sequence[int],
    tokens: Sequence[int],
    results: Sequence[Candidate],
    step_points: Sequence[bool],
    settings: EditingSettings,
) -> Cleared:
    """Replay ``live`` (the history indexes a build keeps, oldest first; ``tokens`` and
    ``step_points`` by position in it: a message's tokens, and whether a step may happen
    after it) with the paired tool results ``results`` (in history order)."""
    trigger = settings.clear_trigger_tokens
    uses_trigger = settings.clear_trigger_tool_uses
    keep = settings.keep_tool_results
    at_least = settings.clear_at_least_tokens
    by_index = {r.index: r for r in results}
    cleared: list[int] = []
    newest_step: list[int] = []
    seen = 0  # results met so far
    settled = 0  # results before this were cleared or passed over
    newest_call = -1  # the newest assistant message with answered calls
    total = 0
    last = len(live) - 1
    for position, index in enumerate(live):
        total += tokens[position]
        result = by_index.get(index)
        if result is not None:
            seen += 1
            newest_call = result.call_index
        over_tokens = 0 < trigger < total
        # Excluded results stay in the history, so they count as not cleared.
        over_uses = 0 < uses_trigger < seen - len(cleared)
        if not step_points[position] or not (over_tokens or over_uses):
            continue
        # Results that may go: older than the newest ``keep``, not of the newest step.
        end = max(seen - keep, settled)
        while end > settled and results[end - 1].call_index >= newest_call:
            end -= 1
        need = max(at_least, total - trigger) if over_tokens else at_least
        freed = 0
        step: list[int] = []
        taken = settled
        while taken < end and (over_uses or freed < need):
            candidate = results[taken]
            taken += 1
            if candidate.excluded or candidate.saving <= 0:
                continue
            freed += candidate.saving
            step.append(candidate.index)
        if freed < at_least or not step:
            continue  # too little to give the cached prefix up for: wait
        cleared.extend(step)
        settled = taken
        total -= freed
        newest_step = step if position == last else []
    return Cleared(cleared, newest_step)

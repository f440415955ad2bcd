"""Tool results put back behind their calls before the pipeline pairs them.

A user can interrupt while a tool runs: the history then reads assistant(call a),
user "wait", tool(a). Calls and results pair by id, so such a result is not an
orphan: it is moved back to follow its call, after that call's results already in
place, moved ones in the order of the assistant message's calls. Only a result that
answers a call of an earlier assistant message still without a result moves; one
whose id matches no such call (unknown, a later call's, or a duplicate) stays where
it is, and the pipeline drops it as before.

This runs once, before units are formed, so that the budget fit sees every call
next to its results. Messages the pipeline passes over (those the compression
summary replaces, answers without text or tool calls, and blank user messages where
the format leaves them out) neither end a call's run of results nor move. The
history is copied only when something moves; the positions of the reordered history
are mapped back to the caller's indexes for the report.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.pipeline import DroppedRange, DropReason, RemovedToolCall, dropped_ranges

_TOOL, _USER = (
    Role.TOOL,
    Role.USER,
)  # read once: enum member lookups show up in the BuildMessages benchmark


@dataclass(frozen=True, slots=True)
class MovedToolResult:
    """A tool result moved back to its call; both indexes are the caller's history's."""

    tool_call_id: str
    # Where the result was.
    from_index: int
    # The assistant message whose call it answers; the result now follows that message.
    call_index: int


@dataclass(slots=True)
class Reordered:
    """The history with its results behind their calls."""

    history: list[ChatMessage]
    # The caller's index of each message of ``history``.
    origin: list[int]
    moved: list[MovedToolResult]


def restore_tool_results(
    history: Sequence[ChatMessage], replaced: Collection[str], blank_user_turns: bool = True
) -> Reordered | None:
    """The history with every out-of-place result moved back to its call, or None when
    no result is out of place (the history is then used as it is). ``blank_user_turns``
    as the pipeline's: whether a blank user message stays (and so ends a run)."""
    if _results_in_place(history, replaced, blank_user_turns):
        return None  # the common case: one look at each message's role
    moved, run_end = _moves(history, replaced, blank_user_turns)
    if not moved:  # only results that cannot be paired: the pipeline drops them
        return None
    return _reordered(history, moved, run_end)


def _ends_a_run(m: ChatMessage, blank_user_turns: bool) -> bool:
    """Whether a message without tool calls, not a result, stays for the pipeline."""
    if m.content and not m.content.isspace():
        return True
    return m.role is _USER and (blank_user_turns or bool(m.parts))


def _results_in_place(
    history: Sequence[ChatMessage], replaced: Collection[str], blank_user_turns: bool
) -> bool:
    """Whether every tool result is in the run of results of a message with its call.

    Looks back from a result only as far as the message its run follows, which is
    never before the previous result, so each message is looked at about once. One
    loop with no calls: it runs on every build but a plain history's
    (bench/README.md, measured costs).
    """
    tool = _TOOL
    last = -1  # the previous result looked at
    calls: tuple[ToolCall, ...] = ()  # of the message whose run ``last`` is in
    for i, m in enumerate(history):
        if m.role is not tool or (replaced and m.id in replaced):
            continue
        j = i - 1
        while j > last:  # back to the message this run follows, past what pairing skips
            b = history[j]
            if (
                b.role is not tool
                and not (replaced and b.id in replaced)
                and (b.tool_calls or _ends_a_run(b, blank_user_turns))
            ):
                calls = b.tool_calls
                break
            j -= 1
        last = i
        call_id = m.tool_call_id
        for c in calls:
            if c.id == call_id:
                break
        else:
            return False
    return True


def _moves(
    history: Sequence[ChatMessage], replaced: Collection[str], blank_user_turns: bool
) -> tuple[list[MovedToolResult], dict[int, int]]:
    """The results to move, in history order, and where each call's run of results
    ends: assistant message index -> index of the message that ended its run."""
    tool = _TOOL
    open_calls: dict[str, int] = {}  # call id -> index of its message, while unanswered
    owner = -1  # the assistant message whose run of results the walk is in, if any
    run_end: dict[int, int] = {}
    moved: list[MovedToolResult] = []
    for i, m in enumerate(history):
        if replaced and m.id in replaced:
            continue
        if m.role is tool:
            call_index = open_calls.pop(m.tool_call_id, -1)
            if call_index >= 0 and call_index != owner:
                moved.append(MovedToolResult(m.tool_call_id, i, call_index))
            continue
        calls = m.tool_calls
        if calls:
            if owner >= 0:
                run_end[owner] = i
            owner = i
            for c in calls:
                open_calls[c.id] = i
        elif owner >= 0 and _ends_a_run(m, blank_user_turns):
            run_end[owner] = i
            owner = -1
    return moved, run_end


def _reordered(
    history: Sequence[ChatMessage], moved: list[MovedToolResult], run_end: dict[int, int]
) -> Reordered:
    # Moved results go in front of the message that ended their call's run, in call order.
    before: dict[int, list[MovedToolResult]] = {}
    for move in moved:
        before.setdefault(run_end[move.call_index], []).append(move)
    for group in before.values():  # one group per assistant message: a message ends one run
        if len(group) > 1:
            order = {c.id: k for k, c in enumerate(history[group[0].call_index].tool_calls)}
            group.sort(key=lambda move: order[move.tool_call_id])
    leaving = {move.from_index for move in moved}
    origin: list[int] = []
    for i in range(len(history)):
        for move in before.get(i, ()):
            origin.append(move.from_index)
        if i not in leaving:
            origin.append(i)
    return Reordered([history[i] for i in origin], origin, moved)


def caller_drops(
    origin: Sequence[int], dropped: list[tuple[int, DropReason]], budget_end: int
) -> list[DroppedRange]:
    """``dropped_ranges`` for a reordered history: each message dropped, for a reason of
    its own or the budget, at its index in the caller's history."""
    at = {origin[p]: reason for p, reason in dropped}
    for p in range(budget_end):
        at.setdefault(origin[p], DropReason.BUDGET)
    return dropped_ranges(sorted(at.items()), 0)


def caller_removed(origin: Sequence[int], removed: list[RemovedToolCall]) -> None:
    """``removed`` (positions in the reordered history) at the caller's indexes."""
    removed[:] = [RemovedToolCall(origin[r.index], r.tool_call_id) for r in removed]

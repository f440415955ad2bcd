"""The message pipeline: a history's checks and repairs, in one pass from the newest back.

Before a history goes to a model, the compression summary replaces the messages it
covers, assistant messages with neither text nor tool calls and tool results that do
not follow their call (once results out of place are moved back to it,
``restore_tool_results``) are dropped (a blank user message is kept, except where the
format cannot carry one: Anthropic's),
and tool calls nobody answered are removed (both provider APIs reject them); each
assistant call is grouped with its results so that trimming keeps or drops them
together. All of this happens in a single walk from the newest message back,
yielding one unit at a time, so the budget rule's kernel (``fit_units``, here too)
stops tokenizing as soon as the budget is full; only cheap checks touch older messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from contextd.core import json_text
from contextd.core.errors import Violations, shown
from contextd.core.json_text import NESTING_RULE
from contextd.core.messages import ChatMessage, CompressionSummary, Role, ToolCall
from contextd.core.tokens import Tokenizer, message_tokens

SUMMARY_HEADER = "[Previous conversation summary]"
_TOOL_CALL_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class DropReason(StrEnum):
    COMPRESSED = "compressed"
    EMPTY = "empty"
    ORPHANED_TOOL_RESULT = "orphaned_tool_result"
    BUDGET = "budget"
    LEADING_ASSISTANT = "leading_assistant"


# A history message with its index in the caller's list (a plain tuple: the
# pipeline makes one per message, and tuples are the cheapest to make).
Entry = tuple[int, ChatMessage]

# An assistant message with the tool results that answer it, or a single message;
# trimming keeps or drops a unit whole.
Unit = list[Entry]


@dataclass(slots=True)
class DroppedRange:
    """Consecutive history messages dropped for one reason."""

    start_index: int
    count: int
    reason: DropReason


@dataclass(frozen=True, slots=True)
class RemovedToolCall:
    index: int
    tool_call_id: str


def is_tool_name(name: str) -> bool:
    """Names both provider APIs accept for a function: 1-64 of [A-Za-z0-9_-]."""
    return _TOOL_NAME.fullmatch(name) is not None


def is_blank(text: str) -> bool:
    return not text or text.isspace()


def summary_message(summary: CompressionSummary) -> ChatMessage:
    return ChatMessage(Role.SYSTEM, f"{SUMMARY_HEADER}\n\n{summary.summary}")


def validate_history(
    history: Sequence[ChatMessage], violations: Violations, field: str = "history"
) -> None:
    """Structural rules every provider format needs; the repairs below handle the rest."""
    seen_message_ids: set[str] = set()
    seen_call_ids: set[str] = set()
    # Read once: per message, enum member lookups show up in the BuildMessages benchmark.
    user, assistant = Role.USER, Role.ASSISTANT
    for i, msg in enumerate(history):
        message_id = msg.id
        if message_id:
            if message_id in seen_message_ids:
                violations.add(f"{field}[{i}].id", f"duplicate message id {shown(message_id)}")
            seen_message_ids.add(message_id)
        role = msg.role
        if (role is user or role is assistant) and not (msg.tool_calls or msg.tool_call_id):
            continue  # the common case needs no further checks
        at = f"{field}[{i}]"
        if role is Role.SYSTEM:
            violations.add(f"{at}.role", "system messages belong in the system prompt, not history")
        if role is Role.TOOL and not msg.tool_call_id:
            violations.add(f"{at}.tool_call_id", "a tool message needs the call id it answers")
        if role is not Role.TOOL and msg.tool_call_id:
            violations.add(f"{at}.tool_call_id", "only tool messages answer a tool call")
        if msg.tool_calls and role is not Role.ASSISTANT:
            violations.add(f"{at}.tool_calls", "only assistant messages carry tool calls")
        for j, call in enumerate(msg.tool_calls):
            _validate_tool_call(call, f"{at}.tool_calls[{j}]", seen_call_ids, violations)


def is_plain(history: Sequence[ChatMessage]) -> bool:
    """Whether the history is plain: user and assistant turns of text, none blank, no tool
    calls or content parts, ids unique. A plain history passes ``validate_history`` and
    leaves the repairs nothing to do, so it is fitted by its texts alone."""
    ids: set[str] = set()
    # Read once: per message, enum member lookups show up in the BuildMessages benchmark.
    user, assistant = Role.USER, Role.ASSISTANT
    for m in history:
        role = m.role
        if (role is not user and role is not assistant) or m.tool_calls or m.tool_call_id:
            return False
        text = m.content
        if not text or text.isspace() or m.parts:
            return False
        message_id = m.id
        if message_id:
            if message_id in ids:
                return False
            ids.add(message_id)
    return True


def _validate_tool_call(call: ToolCall, at: str, seen: set[str], violations: Violations) -> None:
    if not call.id:
        violations.add(f"{at}.id", "a tool call needs an id")
    elif not _TOOL_CALL_ID.fullmatch(call.id):
        violations.add(f"{at}.id", "use 1-128 letters, digits, '_' or '-'")
    elif call.id in seen:
        violations.add(f"{at}.id", f"duplicate tool call id {shown(call.id)}")
    seen.add(call.id)
    if not call.name:
        violations.add(f"{at}.name", "a tool call needs a name")
    elif not is_tool_name(call.name):
        violations.add(f"{at}.name", "use 1-64 letters, digits, '_' or '-'")
    if not is_blank(call.arguments) and not _is_json_object(call.arguments):
        violations.add(f"{at}.arguments", f"arguments must be a JSON object, {NESTING_RULE}")


def _is_json_object(text: str) -> bool:
    """Strict JSON: no NaN or Infinity, no number that overflows, no lone surrogate, no
    nesting deeper than json_text's limit.

    Both provider formats re-send the arguments as JSON, so anything that would not
    survive a strict round trip is refused here rather than failing later.
    """
    try:
        parsed = json_text.loads(text, parse_constant=_refuse_constant)
        json.dumps(parsed, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except ValueError:  # TooDeep and UnicodeEncodeError are ValueErrors
        return False
    return isinstance(parsed, dict)


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def validate_summary(
    summary: CompressionSummary,
    history: Sequence[ChatMessage],
    violations: Violations,
    field: str = "compression_summary",
) -> None:
    if is_blank(summary.summary):
        violations.add(f"{field}.summary", "the summary text must not be blank")
    if not summary.start_message_id:
        violations.add(f"{field}.start_message_id", "required with a compression summary")
        return
    if summary.start_message_id not in summary.message_ids:
        violations.add(f"{field}.start_message_id", "must be one of message_ids")
    if not any(m.id == summary.start_message_id for m in history):
        violations.add(
            f"{field}.start_message_id",
            f"no history message has id {shown(summary.start_message_id)}",
        )


def replaced_ids(summary: CompressionSummary | None) -> frozenset[str]:
    """Ids of the history messages the compression summary replaces."""
    return frozenset(summary.message_ids) - {""} if summary else frozenset()


def units_newest_first(
    history: Sequence[ChatMessage],
    summary: CompressionSummary | None,
    dropped: list[tuple[int, DropReason]],
    removed: list[RemovedToolCall],
    blank_user_turns: bool = True,
) -> Iterator[Unit]:
    """Repair a validated history and yield its units, newest first.

    Messages the summary replaces, assistant messages with neither text nor tool calls
    (user messages without text too unless ``blank_user_turns``), and tool results that
    do not directly follow the call they answer are appended to ``dropped``; tool calls
    no result answers are removed from their message and listed in ``removed``.
    Results out of place are moved back to their calls before (``restore_tool_results``).
    """
    replaced = replaced_ids(summary)
    tool, assistant = Role.TOOL, Role.ASSISTANT
    pending: list[int] = []  # tool results seen, newest first, waiting for their call
    for i in range(len(history) - 1, -1, -1):
        m = history[i]
        if replaced and m.id in replaced:
            dropped.append((i, DropReason.COMPRESSED))
            continue
        if m.role is tool:
            pending.append(i)
            continue
        calls = m.tool_calls
        if not calls:
            content = m.content
            if (not content or content.isspace()) and (
                m.role is assistant or not (blank_user_turns or m.parts)
            ):
                # An answer that says nothing, or a user turn without text or images
                # where the format cannot carry one.
                dropped.append((i, DropReason.EMPTY))
                continue
            if not pending:
                yield [(i, m)]  # the common case: a plain user or assistant message
                continue
        answers: list[int] = []
        open_ids = {c.id for c in calls}
        for t in reversed(pending):
            if history[t].tool_call_id in open_ids:
                open_ids.discard(history[t].tool_call_id)
                answers.append(t)
            else:
                dropped.append((t, DropReason.ORPHANED_TOOL_RESULT))
        pending = []
        if open_ids:
            removed.extend(RemovedToolCall(i, c.id) for c in calls if c.id in open_ids)
            calls = tuple(c for c in calls if c.id not in open_ids)
            if not calls and is_blank(m.content):
                dropped.append((i, DropReason.EMPTY))
                continue
            m = replace(m, tool_calls=calls)
        yield [(i, m), *[(t, history[t]) for t in answers]]
    dropped.extend((t, DropReason.ORPHANED_TOOL_RESULT) for t in pending)


# The budget rule's one kernel: keep history from the newest unit back while it fits.
# History is kept newest first, a tool call and its results as one unit, until the next
# older unit would not fit; that unit and everything older is dropped, even if a smaller
# older message would still fit. Tokens are counted only for what the kernel looks at,
# so the cost follows what is kept, not the history length. Two forms of the same rule:
# ``fit_units`` for the repaired units of the general build, and ``fit_newest`` for a
# plain history (every message a unit of its own, nothing to repair).


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


# Tool results put back behind their calls before the pipeline pairs them.
#
# A user can interrupt while a tool runs: the history then reads assistant(call a),
# user "wait", tool(a). Calls and results pair by id, so such a result is not an
# orphan: it is moved back to follow its call, after that call's results already in
# place, moved ones in the order of the assistant message's calls. Only a result that
# answers a call of an earlier assistant message still without a result moves; one
# whose id matches no such call (unknown, a later call's, or a duplicate) stays where
# it is, and the pipeline drops it as before.
#
# This runs once, before units are formed, so that the budget fit sees every call
# next to its results. Messages the pipeline passes over (those the compression
# summary replaces, answers without text or tool calls, and blank user messages where
# the format leaves them out) neither end a call's run of results nor move. The
# history is copied only when something moves; the positions of the reordered history
# are mapped back to the caller's indexes for the report.
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

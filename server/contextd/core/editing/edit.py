"""Editing applied to a history: results capped, then old ones cleared.

The history is the one the build fits: tool results already back behind their calls.
A result pairs with its call as the pipeline pairs them (the run of tool messages right
after the assistant message, messages the compression summary replaces and blank ones
passed over); results that do not pair are left alone, for the pipeline to drop. Each
changed message is a copy; the history is copied only when something changed.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace

from contextd.core.editing.capping import cap_text
from contextd.core.editing.clearing import Candidate, plan_clearing
from contextd.core.editing.report import EditKind, MessageEdit
from contextd.core.editing.settings import EditingSettings
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.tokens import Tokenizer, message_tokens

_TOOL = Role.TOOL


def cleared_result(name: str, call_id: str, tokens: int) -> str:
    """What a cleared result reads: enough to know what it was and to ask for it again."""
    return f"[tool result cleared to save context: {name}, call {call_id}, {tokens} tokens]"


def cleared_arguments(tokens: int) -> str:
    return json.dumps({"cleared": f"arguments of {tokens} tokens left out"})


@dataclass(slots=True)
class EditedHistory:
    """The history with its edits; ``edits`` in index order. ``counts``: every message's
    tokens after editing when the replay counted them all (clearing on), else None.
    ``first_new``: the first message the clearing step at the history's end changed
    (None when no step happened there): what a prompt cache loses with this request."""

    history: list[ChatMessage]
    counts: list[int] | None
    edits: list[MessageEdit]
    first_new: int | None = None


def has_tool_results(history: Sequence[ChatMessage]) -> bool:
    return any(m.role is _TOOL for m in history)


def edit_history(
    history: Sequence[ChatMessage],
    replaced: Collection[str],
    known: Sequence[int] | None,
    settings: EditingSettings,
    tok: Tokenizer,
) -> EditedHistory | None:
    """``history`` edited by ``settings`` (``replaced``: ids of the messages the
    compression summary replaces; ``known``: token counts by index, when known). None
    when nothing changed."""
    live = [
        i
        for i, m in enumerate(history)
        if not (replaced and m.id in replaced) and not _blank_without_calls(m)
    ]
    pairs = _pairs(history, live)
    if not pairs:
        return None
    edited = list(history)
    counts = _Counts(edited, tok, list(known) if known is not None else [None] * len(history))
    edits: dict[int, MessageEdit] = {}
    original: dict[int, int] = {}  # tokens of each result as given, for its placeholder
    tokens_of = counts.of

    if settings.cap_tokens > 0:
        for i in pairs:
            message = history[i]
            if known is not None and known[i] - tok.message_overhead <= settings.cap_tokens:
                continue  # the stored count says it fits: no need to read it
            capped = cap_text(message.content, settings.cap_tokens, tok)
            if capped is None:
                continue
            before = original[i] = tokens_of(i)
            edited[i] = replace(message, content=capped)
            after = counts.recount(i)
            call = pairs[i][1]
            edits[i] = MessageEdit(i, EditKind.CAPPED, before, after, call.id, call.name)

    first_new = None
    if settings.clearing:
        first_new = _clear(history, edited, live, pairs, settings, counts, edits, original)
    if not edits:
        return None
    ordered = [edits[i] for i in sorted(edits)]
    return EditedHistory(edited, counts.all_live(live), ordered, first_new)


@dataclass(slots=True)
class _Counts:
    """Token counts of the edited history by index, counted when first asked for."""

    messages: list[ChatMessage]
    tok: Tokenizer
    counts: list[int | None] = field(default_factory=list)

    def of(self, i: int) -> int:
        n = self.counts[i]
        if n is None:
            n = self.counts[i] = message_tokens(self.messages[i], self.tok)
        return n

    def recount(self, i: int) -> int:
        n = self.counts[i] = message_tokens(self.messages[i], self.tok)
        return n

    def all_live(self, live: Sequence[int]) -> list[int] | None:
        """Every count, when each message the build keeps was counted (others are never
        read: the pipeline drops them); else None."""
        counts = self.counts
        if any(counts[i] is None for i in live):
            return None
        return [0 if n is None else n for n in counts]


def _blank_without_calls(m: ChatMessage) -> bool:
    # The pipeline drops these, and passes over them when it pairs results.
    return not m.tool_calls and m.role is not _TOOL and (not m.content or m.content.isspace())


def _pairs(history: Sequence[ChatMessage], live: Sequence[int]) -> dict[int, tuple[int, ToolCall]]:
    """Each tool result that pairs with its call: its index -> (the call's message, the
    call)."""
    pairs: dict[int, tuple[int, ToolCall]] = {}
    open_calls: dict[str, ToolCall] = {}
    call_index = -1
    for i in live:
        m = history[i]
        if m.role is _TOOL:
            call = open_calls.pop(m.tool_call_id, None)
            if call is not None:
                pairs[i] = (call_index, call)
            continue
        open_calls = {c.id: c for c in m.tool_calls}
        call_index = i
    return pairs


def _clear(
    history: Sequence[ChatMessage],
    edited: list[ChatMessage],
    live: list[int],
    pairs: dict[int, tuple[int, ToolCall]],
    settings: EditingSettings,
    counts: _Counts,
    edits: dict[int, MessageEdit],
    original: dict[int, int],
) -> int | None:
    """Replay the history (clearing.py), then clear the results it names; the first
    message the step at the history's end changed."""
    tok, tokens_of = counts.tok, counts.of
    tokens = [tokens_of(i) for i in live]
    last = len(live) - 1
    step_points = [k == last or history[live[k + 1]].role is not _TOOL for k in range(len(live))]
    candidates = []
    placeholders: dict[int, ChatMessage] = {}
    arguments: dict[int, int] = {}  # a call's arguments' tokens, by result index
    for i, (call_index, call) in pairs.items():
        size = original.get(i, tokens_of(i))
        placeholder = replace(history[i], content=cleared_result(call.name, call.id, size))
        placeholders[i] = placeholder
        saving = tokens_of(i) - message_tokens(placeholder, tok)
        if settings.clear_tool_inputs and call.arguments:
            arguments[i] = tok.count(call.arguments)
            saving += arguments[i] - tok.count(cleared_arguments(arguments[i]))
        excluded = call.name in settings.exclude_tools
        candidates.append(Candidate(i, call_index, saving, excluded))
    plan = plan_clearing(live, tokens, candidates, step_points, settings)
    for i in plan.indexes:
        before = original.get(i, tokens_of(i))
        edited[i] = placeholders[i]
        after = counts.recount(i)
        call_index, call = pairs[i]
        edits[i] = MessageEdit(i, EditKind.CLEARED, before, after, call.id, call.name)
        if i in arguments:
            _clear_arguments(edited, call_index, call, arguments[i], counts, edits)
    if not plan.newest_step:
        return None
    first = plan.newest_step[0]
    if settings.clear_tool_inputs:
        first = min(first, pairs[first][0])
    return first


def _clear_arguments(
    edited: list[ChatMessage],
    call_index: int,
    call: ToolCall,
    tokens: int,
    counts: _Counts,
    edits: dict[int, MessageEdit],
) -> None:
    message = edited[call_index]
    first = edits.get(call_index)
    before = first.tokens_before if first is not None else counts.of(call_index)
    calls = tuple(
        replace(c, arguments=cleared_arguments(tokens)) if c.id == call.id else c
        for c in message.tool_calls
    )
    edited[call_index] = replace(message, tool_calls=calls)
    after = counts.recount(call_index)
    call_id = first.tool_call_id if first is not None else call.id
    name = first.tool_name if first is not None else call.name
    edits[call_index] = MessageEdit(call_index, EditKind.CLEARED, before, after, call_id, name)

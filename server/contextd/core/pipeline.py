"""The message pipeline: compression summary, empty and orphaned messages, validation.

Every step keeps each message's index in the caller's history so the report can
say exactly which input messages were dropped and why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from contextd.core.errors import Violations
from contextd.core.messages import ChatMessage, CompressionSummary, Role, ToolCall

SUMMARY_HEADER = "[Previous conversation summary]"
_TOOL_CALL_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class DropReason(StrEnum):
    COMPRESSED = "compressed"
    EMPTY = "empty"
    ORPHANED_TOOL_RESULT = "orphaned_tool_result"
    BUDGET = "budget"
    LEADING_ASSISTANT = "leading_assistant"


@dataclass(frozen=True, slots=True)
class Entry:
    """A history message and its index in the caller's list."""

    index: int
    message: ChatMessage


@dataclass(frozen=True, slots=True)
class Dropped:
    index: int
    message_id: str
    reason: DropReason
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class RemovedToolCall:
    index: int
    tool_call_id: str


def summary_message(summary: CompressionSummary) -> ChatMessage:
    return ChatMessage(Role.SYSTEM, f"{SUMMARY_HEADER}\n\n{summary.summary}")


def validate_history(
    history: Sequence[ChatMessage], violations: Violations, field: str = "history"
) -> None:
    """Structural rules every provider format needs; seed-002 repairs handle the rest."""
    seen_message_ids: set[str] = set()
    seen_call_ids: set[str] = set()
    for i, msg in enumerate(history):
        at = f"{field}[{i}]"
        if msg.id:
            if msg.id in seen_message_ids:
                violations.add(f"{at}.id", f"duplicate message id {msg.id!r}")
            seen_message_ids.add(msg.id)
        if msg.role is Role.SYSTEM:
            violations.add(f"{at}.role", "system messages belong in the system prompt, not history")
        if msg.role is Role.TOOL and not msg.tool_call_id:
            violations.add(
                f"{at}.tool_call_id", "a tool message needs the id of the call it answers"
            )
        if msg.role is not Role.TOOL and msg.tool_call_id:
            violations.add(f"{at}.tool_call_id", "only tool messages answer a tool call")
        if msg.tool_calls and msg.role is not Role.ASSISTANT:
            violations.add(f"{at}.tool_calls", "only assistant messages carry tool calls")
        for j, call in enumerate(msg.tool_calls):
            _validate_tool_call(call, f"{at}.tool_calls[{j}]", seen_call_ids, violations)


def _validate_tool_call(call: ToolCall, at: str, seen: set[str], violations: Violations) -> None:
    if not call.id:
        violations.add(f"{at}.id", "a tool call needs an id")
    elif not _TOOL_CALL_ID.fullmatch(call.id):
        violations.add(f"{at}.id", "use 1-128 letters, digits, '_' or '-'")
    elif call.id in seen:
        violations.add(f"{at}.id", f"duplicate tool call id {call.id!r}")
    seen.add(call.id)
    if not call.name:
        violations.add(f"{at}.name", "a tool call needs a name")
    elif not _TOOL_NAME.fullmatch(call.name):
        violations.add(f"{at}.name", "use 1-64 letters, digits, '_' or '-'")
    if call.arguments.strip():
        try:
            parsed = json.loads(call.arguments)
        except ValueError:
            violations.add(f"{at}.arguments", "arguments must be a JSON object")
        else:
            if not isinstance(parsed, dict):
                violations.add(f"{at}.arguments", "arguments must be a JSON object")


def validate_summary(
    summary: CompressionSummary,
    history: Sequence[ChatMessage],
    violations: Violations,
    field: str = "compression_summary",
) -> None:
    if not summary.summary.strip():
        violations.add(f"{field}.summary", "the summary text must not be blank")
    if not summary.start_message_id:
        violations.add(f"{field}.start_message_id", "required with a compression summary")
        return
    if summary.start_message_id not in summary.message_ids:
        violations.add(f"{field}.start_message_id", "must be one of message_ids")
    if not any(m.id == summary.start_message_id for m in history):
        violations.add(
            f"{field}.start_message_id",
            f"no history message has id {summary.start_message_id!r}",
        )


def apply_compression(
    entries: list[Entry], summary: CompressionSummary | None
) -> tuple[list[Entry], list[Dropped]]:
    """Step 1: remove the messages the summary replaces (the summary itself goes first)."""
    if summary is None:
        return entries, []
    replaced = set(summary.message_ids)
    kept = [e for e in entries if not (e.message.id and e.message.id in replaced)]
    dropped = [
        Dropped(e.index, e.message.id, DropReason.COMPRESSED)
        for e in entries
        if e.message.id and e.message.id in replaced
    ]
    return kept, dropped


def drop_empty(entries: list[Entry]) -> tuple[list[Entry], list[Dropped]]:
    """Step 2: drop assistant messages with neither text nor tool calls, and blank user ones.

    Providers reject blank user turns, so they go the same way as empty answers.
    """
    kept: list[Entry] = []
    dropped: list[Dropped] = []
    for e in entries:
        m = e.message
        blank = not m.content.strip()
        if blank and (m.role is Role.USER or (m.role is Role.ASSISTANT and not m.tool_calls)):
            dropped.append(Dropped(e.index, m.id, DropReason.EMPTY))
        else:
            kept.append(e)
    return kept, dropped


def drop_orphaned_tool_results(entries: list[Entry]) -> tuple[list[Entry], list[Dropped]]:
    """Step 3: keep a tool message only right after the assistant call it answers.

    Providers require tool results to follow their call directly (OpenAI) or in
    the next turn (Anthropic), so a result elsewhere, or a second result for the
    same call, is orphaned.
    """
    kept: list[Entry] = []
    dropped: list[Dropped] = []
    open_calls: set[str] = set()
    for e in entries:
        m = e.message
        if m.role is Role.TOOL:
            if m.tool_call_id in open_calls:
                open_calls.discard(m.tool_call_id)
                kept.append(e)
            else:
                dropped.append(Dropped(e.index, m.id, DropReason.ORPHANED_TOOL_RESULT))
            continue
        open_calls = {c.id for c in m.tool_calls}
        kept.append(e)
    return kept, dropped


def drop_unanswered_tool_calls(
    entries: list[Entry],
) -> tuple[list[Entry], list[Dropped], list[RemovedToolCall]]:
    """Step 3b: remove tool calls no tool message answers (providers reject them).

    An assistant message left with no text and no calls is dropped as empty.
    """
    answered = {e.message.tool_call_id for e in entries if e.message.role is Role.TOOL}
    kept: list[Entry] = []
    dropped: list[Dropped] = []
    removed: list[RemovedToolCall] = []
    for e in entries:
        m = e.message
        missing = [c for c in m.tool_calls if c.id not in answered]
        if not missing:
            kept.append(e)
            continue
        removed.extend(RemovedToolCall(e.index, c.id) for c in missing)
        calls = tuple(c for c in m.tool_calls if c.id in answered)
        if calls or m.content.strip():
            kept.append(Entry(e.index, replace(m, tool_calls=calls)))
        else:
            dropped.append(Dropped(e.index, m.id, DropReason.EMPTY))
    return kept, dropped, removed


def group_turns(entries: list[Entry]) -> list[list[Entry]]:
    """Units trimming keeps or drops whole: an assistant call with its results, or one message."""
    groups: list[list[Entry]] = []
    for e in entries:
        if e.message.role is Role.TOOL and groups and groups[-1][0].message.tool_calls:
            groups[-1].append(e)
        else:
            groups.append([e])
    return groups


def check_pipeline_invariants(entries: list[Entry]) -> None:
    """Step 5: the list must not start with a tool message, nor hold an orphaned one.

    The repairs above guarantee this; a failure is a bug, not bad input.
    """
    if entries and entries[0].message.role is Role.TOOL:
        raise AssertionError("history starts with a tool message after repair")
    calls = {c.id for e in entries for c in e.message.tool_calls}
    for e in entries:
        if e.message.role is Role.TOOL and e.message.tool_call_id not in calls:
            raise AssertionError("orphaned tool message after repair")

"""The lines a turn writes to its session's event log (docs/chat.md, "The event log"):
its events, from its start to its end (the session's own start and end lines are
store/event_log/events.py's SessionLog).

Everything about a line's type, step and meta is decided here; the store encodes and
writes it (store/event_log/).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from contextd.app.chat.turn import TokenUsage
from contextd.app.session_build_request import ContextLayer
from contextd.core.build_request import BuildResult
from contextd.core.messages import Role
from contextd.core.pipeline import SUMMARY_HEADER
from contextd.store.event_log.events import EventStore, LogLines, NewEvent, event_tokens


class TurnLog:
    """The lines of one turn (``index``) of a session; none for a session never stored
    (an ephemeral turn's, whose id is "").

    A step's ``assistant`` line is written with the turn's next line (its ``final`` and
    ``turn_end``, its tool calls' ``action`` lines), in one write: every way on from a
    model call writes one, and the lines keep their order and their times."""

    __slots__ = ("_events", "_index", "_pending", "_session_id", "_tenant_id")

    def __init__(self, events: EventStore, session_id: str, tenant_id: str, index: int) -> None:
        self._events = events if session_id else None
        self._session_id = session_id
        self._tenant_id = tenant_id
        self._index = index
        self._pending: NewEvent | None = None  # the assistant line not written yet

    async def turn_start(
        self,
        content: str,
        input_tokens: int,
        continuing: bool,
        context: dict[str, Any] | None = None,
    ) -> None:
        """``input_tokens``: the estimate of the user's input (the user message, or the
        tool results of a continued turn); the whole prompt's is the first step's.
        ``context``: the first step's build report (``context_meta``)."""
        await self._write(_turn_start(self._index, content, input_tokens, continuing, context))

    def starting(
        self,
        content: str,
        input_tokens: int,
        continuing: bool,
        context: dict[str, Any] | None = None,
    ) -> LogLines:
        """``turn_start``'s line, to be written with the turn's input."""
        return self._joining(_turn_start(self._index, content, input_tokens, continuing, context))

    def assistant(self, step: int, text: str, usage: TokenUsage) -> None:
        """A model call ended, with ``text``: logged with the turn's next line."""
        meta: dict[str, object] = {"tokens": tokens(usage)}
        self._pending = NewEvent(
            "assistant", self._index, step, text, "assistant", meta, time.time()
        )

    async def action(
        self, step: int, tool: str, tool_input: str, tool_call_id: str | None = None
    ) -> None:
        meta: dict[str, object] = {"tool": tool, "input": tool_input}
        if tool_call_id is not None:
            meta["tool_call_id"] = tool_call_id
        await self._append("action", step=step, meta=meta)

    async def observation(
        self, step: int, result: str, tool: str, tool_call_id: str | None = None
    ) -> None:
        """A tool's result, at the step of the call it answers."""
        meta: dict[str, object] = {"tool": tool}
        if tool_call_id is not None:
            meta["tool_call_id"] = tool_call_id
        await self._append("observation", step=step, content=result, meta=meta)

    def ending(
        self,
        status: str,
        step_count: int,
        turn_usage: TokenUsage,
        *,
        duration_ms: int,
        error: str = "",
        final: tuple[int, str] | None = None,
        join: bool = True,
    ) -> LogLines:
        """``turn_end``'s lines, to be written with the turn's answer (``join``), or
        once it is stored."""
        meta: dict[str, object] = {
            "status": status,
            "stepCount": step_count,
            "durationMs": duration_ms,
            "tokens": tokens(turn_usage),
        }
        if error:
            meta["errorMessage"] = error
        end = NewEvent("turn_end", self._index, meta=meta)
        if final is None:
            return self._joining(end, join=join)
        step, answer = final
        answered = NewEvent(
            "final", self._index, step, answer, "assistant", {"tokens": tokens(turn_usage)}
        )
        return self._joining(answered, end, join=join)

    def _joining(self, *events: NewEvent, join: bool = True) -> LogLines:
        """``events`` after the assistant line not written yet, if any, as a write to
        join to a write of the turn's messages (``join``), where the log can join one."""
        if self._pending is not None:
            events = (self._pending, *events)
        joined = None
        if join and self._events is not None:
            joined = self._events.joined(self._session_id, events, tenant_id=self._tenant_id)
        return LogLines(events, joined)

    async def written(self, lines: LogLines) -> None:
        """The write ``lines`` were to join committed: they are written (with it, or now,
        where the log could not join it), the assistant line among them too."""
        if self._pending is not None and lines.events[0] is self._pending:
            self._pending = None
        if lines.joined is None and self._events is not None:
            await self._events.append_many(
                self._session_id, lines.events, tenant_id=self._tenant_id
            )

    async def _append(
        self,
        type: str,
        *,
        step: int | None = None,
        content: str | None = None,
        role: str | None = None,
        meta: dict[str, object] | None = None,
    ) -> None:
        await self._write(NewEvent(type, self._index, step, content, role, meta))

    async def _write(self, *events: NewEvent) -> None:
        """``events`` after the assistant line not written yet, if any, in one write."""
        if self._events is None:
            return
        if self._pending is not None:
            events = (self._pending, *events)
            self._pending = None
        await self._events.append_many(self._session_id, events, tenant_id=self._tenant_id)


def _turn_start(
    index: int,
    content: str,
    input_tokens: int,
    continuing: bool,
    context: dict[str, Any] | None,
) -> NewEvent:
    meta: dict[str, object] = {"tokens": {"prompt": input_tokens}, "continuing": continuing}
    if context is not None:
        meta["context"] = context
    return NewEvent("turn_start", index, content=content, role="user", meta=meta)


def context_meta(built: BuildResult, layers: Sequence[ContextLayer]) -> dict[str, Any]:
    """``meta.context`` of turn_start: the build report of the turn's first step, with
    what each context layer gave, the memories the memory layer put in (their text and
    score) and the compression summary's text when it was in, so that the turn can be
    shown later as the model saw it. Indexes are positions in the session (the stored
    messages' ``seq``)."""
    report = built.report
    kept = asdict(report)
    kept["total_tokens"] = report.total_tokens
    if report.summary_included:
        # The summary message: the one system message that starts with its header.
        summary = next(
            (
                m.content
                for m in built.messages
                if m.role is Role.SYSTEM and m.content.startswith(SUMMARY_HEADER)
            ),
            None,
        )
        if summary is not None:
            kept["summary"] = summary.removeprefix(SUMMARY_HEADER).lstrip("\n")
    kept["context_layers"] = [
        {
            "name": layer.name,
            "included": layer.included,
            "tokens": layer.tokens,
            "items_kept": layer.items_kept,
            "items_dropped": layer.items_dropped,
            "note": layer.note,
        }
        for layer in layers
    ]
    memory = next((layer for layer in layers if layer.name == "memory"), None)
    if memory is not None and memory.items_kept:
        kept["memories"] = [
            {"content": content, "score": round(score, 6)}
            for content, score in memory.memories[: memory.items_kept]
        ]
    return kept


def tokens(u: TokenUsage) -> dict[str, int | bool]:
    """``meta.tokens`` of a usage: a prompt figure no one reported is the estimate."""
    return event_tokens(
        u.prompt_tokens or u.prompt_tokens_estimate,
        u.completion_tokens,
        cache_read=u.cache_read_tokens,
        cache_write=u.cache_write_tokens,
        estimated=u.estimated or (not u.prompt_tokens and u.prompt_tokens_estimate > 0),
    )

"""A turn's state and its usage, per step, turn and session, and the lines its event log
gets: pure, no store, no model."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from contextd.app.chat.event_log import TurnLog
from contextd.app.chat.turn import TokenUsage, Turn
from contextd.core.messages import ToolCall
from contextd.core.tokens import TokenizerRegistry
from contextd.providers.base import Finished, Usage
from contextd.store.event_log.events import NewEvent
from contextd.store.models import Session, UsageTotals

TOKENIZER = TokenizerRegistry("cl100k_base").get("cl100k_base")


def turn() -> Turn:
    return Turn(Session("s1", "alice"), 1, "alice", TOKENIZER, "hi")


def test_reported_usage_is_counted_into_the_turn_once() -> None:
    t = turn()
    t.begin_step(40)
    t.add_text("Tea.")
    step = t.take_usage(Usage(42, 3, cache_read_tokens=30), [])
    assert (step.prompt_tokens, step.completion_tokens, step.estimated) == (42, 3, False)
    # Until the step ends, what is saved of the turn holds the step's figures.
    assert t.usage.so_far() == UsageTotals(42, 3, 40, 30, 0, False)
    t.finish_step(Finished("stop"))
    t.end_step([])
    t.usage.count_step()  # counted once, however often it is asked
    assert t.usage.turn == TokenUsage(42, 3, 40, 30, 0, False)


def test_what_no_provider_reported_is_counted_and_marked_estimated() -> None:
    t = turn()
    t.begin_step(40)
    t.add_text("Looking it up.")
    call = ToolCall("c1", "get_weather", '{"city": "Paris"}')
    t.finish_step(Finished("tool_calls"))
    t.end_step([call])
    expected = sum(TOKENIZER.count(s) for s in ("Looking it up.", call.name, call.arguments))
    assert t.usage.turn == TokenUsage(40, expected, 40, 0, 0, True)


def test_a_call_that_broke_off_silent_counts_only_its_estimate() -> None:
    t = turn()
    t.begin_step(40)
    t.end_step([])
    assert t.usage.turn == TokenUsage(0, 0, 40, 0, 0, False)


def test_steps_count_on_through_a_continued_turn() -> None:
    t = turn()
    t.continue_from(2, "the question that began it")
    assert (t.step, t.steps_this_call, t.question) == (2, 1, "the question that began it")
    t.begin_step(10)
    t.add_text("first")
    t.end_step([])
    t.next_step()
    t.begin_step(10)
    t.add_text(" second")
    assert (t.step, t.steps_this_call) == (3, 2)
    assert (t.text, t.step_text) == ("first second", " second")


class Lines:
    """An event store that keeps what is appended, and each write's lines."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.writes: list[list[str]] = []

    async def append_many(
        self, session_id: str, events: Sequence[NewEvent], *, tenant_id: str
    ) -> None:
        self.writes.append([e.type for e in events])
        self.lines += [dataclasses.asdict(e) for e in events]


async def test_the_turn_end_line() -> None:
    events = Lines()
    log = TurnLog(events, "s1", "default", 3)  # type: ignore[arg-type]
    # No prompt figure reported: the estimate stands in for it, marked estimated.
    usage = TokenUsage(0, 5, 40)
    await log.written(
        log.ending("error", 2, usage, duration_ms=12, error="the provider failed", join=False)
    )
    await log.written(log.ending("interrupted", 2, usage, duration_ms=7, join=False))
    ended, closed = events.lines
    assert ended["turn"] == 3 and ended["step"] is None
    assert list(ended["meta"].items()) == [
        ("status", "error"),
        ("stepCount", 2),
        ("durationMs", 12),
        ("tokens", {"prompt": 40, "completion": 5, "total": 45, "estimated": True}),
        ("errorMessage", "the provider failed"),
    ]
    assert list(closed["meta"]) == ["status", "stepCount", "durationMs", "tokens"]


async def test_a_step_s_assistant_line_is_written_with_the_turn_s_next_line() -> None:
    events = Lines()
    log = TurnLog(events, "s1", "default", 3)  # type: ignore[arg-type]
    usage = TokenUsage(10, 5)
    before = time.time()
    log.assistant(1, "calling", usage)
    assert events.writes == []
    await log.action(1, "lookup", "{}", "c1")
    log.assistant(2, "the answer", usage)
    await log.written(
        log.ending("ok", 3, usage, duration_ms=9, final=(2, "the answer"), join=False)
    )
    assert events.writes == [["assistant", "action"], ["assistant", "final", "turn_end"]]
    first, _, second, *_ = events.lines
    # Each keeps the time its model call ended.
    assert before <= first["ts"] <= second["ts"] <= time.time()
    assert (second["step"], second["content"], second["role"]) == (2, "the answer", "assistant")

"""A turn's partial answer while it streams (at most one write a second, none left once it
ends), and the closing at start of the turns a killed server left open."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

from contextd.app.chat import ChatTurnRequest, TurnCompleted, TurnStarted
from contextd.app.scope import Caller
from contextd.core.messages import ChatMessage, Role
from contextd.store.models import UsageTotals, new_message
from contextd.store.partial_answers import PartialAnswerRepo

from tests.support.chat_app import App, in_process

# The echo answer quotes the message: about 100 words, streamed over 3 s.
LONG = " ".join(f"w{k}" for k in range(90))


def slow(app: App) -> None:
    app.provider.chunk_delay = 0.1


async def test_the_streaming_text_is_saved_once_a_second(tmp_path: Path) -> None:
    async with in_process(tmp_path) as app:
        slow(app)
        partials = app.partials
        saves: list[tuple[float, str]] = []
        save = partials.save

        async def recording(session_id: str, step: int, text: str, usage: UsageTotals) -> None:
            saves.append((time.monotonic(), text))
            await save(session_id, step, text, usage)

        partials.save = recording  # type: ignore[method-assign]
        stream = app.chat.run(ChatTurnRequest(Caller("alice"), "", LONG, app.tokenizer))
        events = []
        begun = time.monotonic()
        seen_mid_turn = None
        async for event in stream:
            events.append(event)
            if seen_mid_turn is None and time.monotonic() - begun > 1.5:
                [seen_mid_turn] = await partials.left_behind()
        started, completed = events[0], events[-1]
        assert isinstance(started, TurnStarted) and isinstance(completed, TurnCompleted)
        assert time.monotonic() - begun > 2.5

        assert seen_mid_turn is not None and seen_mid_turn.text
        assert completed.final_text.startswith(seen_mid_turn.text)
        assert seen_mid_turn.usage[2] == started.prompt_tokens_estimate
        assert 2 <= len(saves) <= 4
        assert saves[0][0] - begun >= 0.95
        assert all(b[0] - a[0] >= 0.95 for a, b in itertools.pairwise(saves))
        assert all(b[1].startswith(a[1]) for a, b in itertools.pairwise(saves))
        assert await partials.left_behind() == []


async def test_a_failing_write_does_not_break_the_turn(tmp_path: Path) -> None:
    async with in_process(tmp_path) as app:
        slow(app)

        async def failing(session_id: str, step: int, text: str, usage: UsageTotals) -> None:
            raise OSError("no room")

        app.partials.save = failing  # type: ignore[method-assign]
        req = ChatTurnRequest(Caller("alice"), "", LONG, app.tokenizer)
        events = [event async for event in app.chat.run(req)]
        completed = events[-1]
        assert isinstance(completed, TurnCompleted) and completed.status.value == "ok"
        assert await app.partials.left_behind() == []


async def test_a_cancelled_turn_leaves_no_partial_answer(tmp_path: Path) -> None:
    async with in_process(tmp_path) as app:
        slow(app)
        stream = app.chat.run(ChatTurnRequest(Caller("alice"), "", LONG, app.tokenizer))
        begun = time.monotonic()
        async for _ in stream:
            if time.monotonic() - begun > 1.2:
                break
        await stream.aclose()
        assert await app.partials.left_behind() == []


async def killed_turn(app: App, text: str) -> str:
    """What a server killed while a turn streamed leaves: the user message with the
    open row, the turn_start event, the text saved so far. Returns the session."""
    session = await app.sessions.create(Caller("alice"))
    partials: PartialAnswerRepo = app.partials
    await app.conversation.append(
        session.id,
        "alice",
        [new_message(app.sessions.tokenizers, ChatMessage(Role.USER, "Tell me"), 1)],
        also=partials.opening(session.tenant_id, session.id, 1, "cl100k_base"),
    )
    await app.events.append(session.id, "session_start")
    await app.events.append(session.id, "turn_start", turn=1, content="Tell me")
    if text:
        await partials.save(session.id, 0, text, UsageTotals(0, 0, 50))
    return session.id


async def test_a_killed_turn_is_closed_once(tmp_path: Path) -> None:
    async with in_process(tmp_path) as app:
        sid = await killed_turn(app, "Once upon")
        assert await app.chat.close_interrupted_turns() == 1

        stored = await app.conversation.tail(sid, 10, "cl100k_base")
        assert [(m.message.role, m.message.content, m.turn_index, m.status) for m in stored] == [
            (Role.USER, "Tell me", 1, ""),
            (Role.ASSISTANT, "Once upon", 1, "interrupted"),
        ]
        assert stored[-1].tokens["cl100k_base"] > 0
        lines = [e async for e in app.events.read(sid)]
        assert [(e["type"], e.get("turn")) for e in lines] == [
            ("session_start", None),
            ("turn_start", 1),
            ("assistant", 1),
            ("turn_end", 1),
        ]
        assert lines[2]["content"] == "Once upon" and lines[2]["step"] == 0
        # From the turn's start to the last save of its text.
        assert lines[3]["meta"]["durationMs"] >= 0
        assert lines[3]["meta"] == {
            "status": "interrupted",
            "stepCount": 1,
            "durationMs": lines[3]["meta"]["durationMs"],
            # No provider reported them: the prompt's estimate, the kept text counted.
            "tokens": {"prompt": 50, "completion": 2, "total": 52, "estimated": True},
        }

        assert await app.chat.close_interrupted_turns() == 0
        assert await app.conversation.tail(sid, 10, "cl100k_base") == stored
        assert [e async for e in app.events.read(sid)] == lines


async def test_a_turn_killed_before_its_text_gets_only_its_end(tmp_path: Path) -> None:
    async with in_process(tmp_path) as app:
        sid = await killed_turn(app, "")
        assert await app.chat.close_interrupted_turns() == 1
        stored = await app.conversation.tail(sid, 10, "cl100k_base")
        assert [m.message.role for m in stored] == [Role.USER]
        lines = [e async for e in app.events.read(sid)]
        assert [e["type"] for e in lines] == ["session_start", "turn_start", "turn_end"]
        assert lines[-1]["meta"]["status"] == "interrupted"


async def test_a_turn_whose_end_is_logged_is_not_logged_again(tmp_path: Path) -> None:
    """A start stopped between the log and the commit: the next one only stores."""
    async with in_process(tmp_path) as app:
        sid = await killed_turn(app, "Once upon")
        events = app.events
        await events.append(sid, "assistant", turn=1, step=0, content="Once upon")
        await events.append(sid, "turn_end", turn=1, meta={"status": "interrupted"})
        before = [e async for e in events.read(sid)]
        assert await app.chat.close_interrupted_turns() == 1
        assert [e async for e in events.read(sid)] == before
        stored = await app.conversation.tail(sid, 10, "cl100k_base")
        assert [m.status for m in stored] == ["", "interrupted"]


async def test_the_next_turn_follows_the_closed_one(tmp_path: Path) -> None:
    async with in_process(tmp_path) as app:
        sid = await killed_turn(app, "Once upon")
        await app.chat.close_interrupted_turns()
        req = ChatTurnRequest(Caller("alice"), sid, "Go on", app.tokenizer)
        events = [event async for event in app.chat.run(req)]
        started, completed = events[0], events[-1]
        assert isinstance(started, TurnStarted) and started.turn_index == 2
        assert isinstance(completed, TurnCompleted) and completed.status.value == "ok"
        # The closed turn's text is in the history the model is sent.
        sent = app.provider.requests[-1].messages
        assert ("Once upon", Role.ASSISTANT) in [(m.content, m.role) for m in sent]

"""A chat turn whose stream is closed after its last event: nothing is stored twice."""

from __future__ import annotations

from pathlib import Path

from contextd.app.chat import ChatTurnRequest, TurnCompleted, TurnStarted
from contextd.app.scope import Caller

from tests.support.chat_app import in_process


async def test_a_stream_closed_at_turn_completed_stores_the_answer_once(tmp_path: Path) -> None:
    async with in_process(tmp_path) as app:
        chat = app.chat
        stream = chat.run(ChatTurnRequest(Caller("alice"), "", "hello there", app.tokenizer))
        started = completed = None
        async for event in stream:
            if isinstance(event, TurnStarted):
                started = event
            if isinstance(event, TurnCompleted):
                completed = event
                # The client goes away while the turn is suspended at its last event.
                await stream.aclose()
                break
        assert started is not None and completed is not None

        stored = await app.conversation.tail(started.session_id, 10, "cl100k_base")
        assert [(m.message.role.value, m.status) for m in stored] == [
            ("user", ""),
            ("assistant", ""),
        ]
        assert stored[-1].message.content == completed.final_text
        lines = [e async for e in app.events.read(started.session_id)]
        assert [e["type"] for e in lines].count("turn_end") == 1
        assert completed.session_usage.completion_tokens == completed.turn_usage.completion_tokens

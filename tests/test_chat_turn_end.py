"""A chat turn whose stream is closed after its last event: nothing is stored twice."""

from __future__ import annotations

from pathlib import Path

from contextd.app.chat import ChatApp, ChatLimits, ChatTurnRequest, TurnCompleted, TurnStarted
from contextd.app.scope import Caller
from contextd.app.session_context import LayerDefaults, SessionContextBuilder
from contextd.app.sessions import SessionsApp
from contextd.core.tokens import TokenizerRegistry
from contextd.providers.echo import EchoProvider
from contextd.store.catalog import CatalogRepo
from contextd.store.conversation import ConversationRepo
from contextd.store.db import DB_FILENAME, Database
from contextd.store.events import EventLog
from contextd.store.memories import MemoryRepo
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo


async def test_a_stream_closed_at_turn_completed_stores_the_answer_once(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / DB_FILENAME)
    tokenizers = TokenizerRegistry("cl100k_base")
    memories, summaries = MemoryRepo(db), SummaryRepo(db)
    events = EventLog(tmp_path / "history")
    sessions = SessionsApp(
        SessionRepo(db), ConversationRepo(db), summaries, memories, tokenizers, events
    )
    defaults = LayerDefaults("You are a test.", "", True, 5, 3)
    builder = SessionContextBuilder(defaults, sessions, CatalogRepo(db), memories, summaries)
    chat = ChatApp(sessions, builder, memories, events, EchoProvider(), ChatLimits(8000, 6000, 4))
    request = ChatTurnRequest(Caller("alice"), "", "hello there", tokenizers.get("cl100k_base"))
    try:
        stream = chat.run(request)
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

        stored = await sessions.conversation.tail(started.session_id, 10, "cl100k_base")
        assert [(m.message.role.value, m.status) for m in stored] == [
            ("user", ""),
            ("assistant", ""),
        ]
        assert stored[-1].message.content == completed.final_text
        lines = [e async for e in events.read(started.session_id)]
        assert [e["type"] for e in lines].count("turn_end") == 1
        assert completed.session_usage.completion_tokens == completed.turn_usage.completion_tokens
    finally:
        await events.aclose()
        await db.close()

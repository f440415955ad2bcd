"""A session deleted while one of its chat turns streams: the turn ends NOT_FOUND naming
the session, and nothing else stored is lost.

The server runs in this process with a provider that holds its answer after the first
piece until the test lets it go, so the deletion lands mid-turn every time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from contextd.providers.base import (
    Capabilities,
    Finished,
    ModelEvent,
    ModelRequest,
    TextDelta,
    Usage,
)
from contextd.root import server as contextd_server
from contextd.root import wiring
from contextd.store.engine.sqlite import SqliteDatabase
from contextd.store.event_log.events import HISTORY_DIR
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

from tests.support.settings import terms_only


class HeldProvider:
    """Streams "first " then, once ``release`` is set, "second"; ``streaming`` is set
    between the two."""

    name = "held"
    default_model = "held-model"
    capabilities = Capabilities(follows_instructions=False)  # its answer is fixed

    def __init__(self) -> None:
        self.streaming = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        yield TextDelta("first ")
        self.streaming.set()
        await self.release.wait()
        yield TextDelta("second")
        yield Usage(10, 2)
        yield Finished("stop")

    async def aclose(self) -> None:
        return None


@dataclass
class Live:
    provider: HeldProvider
    db: SqliteDatabase
    data_dir: Path
    chat: Any
    sessions: Any
    memories: Any


@pytest.fixture
async def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Live]:
    provider = HeldProvider()
    monkeypatch.setattr(wiring, "make_provider", lambda *_, **__: provider)
    running = await contextd_server.start(terms_only(port=0, data_dir=tmp_path))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            yield Live(
                provider,
                running.db,
                tmp_path,
                chat_pb2_grpc.ChatServiceStub(channel),
                sessions_pb2_grpc.SessionServiceStub(channel),
                memory_pb2_grpc.MemoryServiceStub(channel),
            )
    finally:
        provider.release.set()
        await running.stop(0)


async def new_session(live: Live, user: str, *texts: str) -> str:
    created = await live.sessions.CreateSession(spb.CreateSessionRequest(user_id=user))
    session_id: str = created.session.id
    messages = [
        pb.Message(role=pb.ROLE_USER if k % 2 == 0 else pb.ROLE_ASSISTANT, content=text)
        for k, text in enumerate(texts)
    ]
    await live.sessions.AppendMessages(
        spb.AppendMessagesRequest(
            user_id=user, session_id=session_id, messages=messages, turn_index=1
        )
    )
    await live.sessions.SetSessionSummary(
        spb.SetSessionSummaryRequest(user_id=user, session_id=session_id, summary=texts[0])
    )
    return session_id


# Every stored row but those of the session left out: what the deletion may not touch.
_ROWS = {
    "sessions": "SELECT * FROM sessions WHERE id != :left_out ORDER BY id",
    "conversation": "SELECT * FROM conversation WHERE session_id != :left_out ORDER BY id",
    "message_tokens": "SELECT t.* FROM message_tokens t JOIN conversation c"
    " ON c.id = t.message_id WHERE c.session_id != :left_out ORDER BY 1, 2",
    "session_summaries": "SELECT * FROM session_summaries WHERE session_id != :left_out"
    " ORDER BY session_id",
    "compression_summaries": "SELECT * FROM compression_summaries"
    " WHERE session_id != :left_out ORDER BY id",
    "memories": "SELECT * FROM memories ORDER BY id",
    "memory_history": "SELECT * FROM memory_history ORDER BY id",
}


async def rows(db: SqliteDatabase, left_out: str) -> dict[str, list[tuple[Any, ...]]]:
    return {
        table: [tuple(row) for row in await db.reader.execute_fetchall(sql, {"left_out": left_out})]
        for table, sql in _ROWS.items()
    }


async def test_a_session_deleted_while_its_turn_streams_ends_the_turn_not_found(
    live: Live, caplog: pytest.LogCaptureFixture
) -> None:
    kept = await new_session(live, "alice", "I plan a trip", "Where to?")
    await new_session(live, "bob", "Bob's question", "Bob's answer")
    await live.memories.AddMemory(mpb.AddMemoryRequest(user_id="alice", content="Alice likes tea"))
    doomed = await new_session(live, "alice", "An earlier question", "An earlier answer")
    before = await rows(live.db, doomed)
    assert len(before["conversation"]) == 4 and len(before["memories"]) == 1

    call = live.chat.StreamChat(
        cpb.StreamChatRequest(
            session=pb.SessionContext(user_id="alice", session_id=doomed),
            user_message="a question the session will not see answered",
        )
    )
    events = []
    with caplog.at_level(logging.INFO, "contextd.rpc"):
        async for event in call:
            events.append(event.WhichOneof("event"))
            if events[-1] == "text_delta":
                break
        await live.provider.streaming.wait()
        await live.sessions.DeleteSession(
            spb.DeleteSessionRequest(user_id="alice", session_id=doomed)
        )
        live.provider.release.set()
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            async for event in call:
                events.append(event.WhichOneof("event"))
    assert events[:2] == ["turn_started", "text_delta"]
    assert ended.value.code() == grpc.StatusCode.NOT_FOUND
    assert doomed in (ended.value.details() or "")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]

    # The session and everything in it are gone, nothing was stored for it after its
    # deletion, and every other row is as it was.
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await live.sessions.GetSession(spb.GetSessionRequest(user_id="alice", session_id=doomed))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    for table, sql in (
        ("conversation", "SELECT COUNT(*) FROM conversation WHERE session_id = ?"),
        ("summaries", "SELECT COUNT(*) FROM session_summaries WHERE session_id = ?"),
    ):
        [(count,)] = await live.db.reader.execute_fetchall(sql, (doomed,))
        assert count == 0, table
    assert await rows(live.db, doomed) == before
    # Its event log too: the turn's later events did not write it anew.
    assert not (live.data_dir / HISTORY_DIR / f"{doomed}.jsonl").exists()

    # The other session goes on as before.
    turn = [
        event
        async for event in live.chat.StreamChat(
            cpb.StreamChatRequest(
                session=pb.SessionContext(user_id="alice", session_id=kept),
                user_message="and the next question",
            )
        )
    ]
    assert turn[-1].turn_completed.status == cpb.TURN_STATUS_OK
    assert turn[0].turn_started.context.history_kept == 2

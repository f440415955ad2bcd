"""An in-process contextd whose model calls a test can hold, and the stored rows of one
user, for the DeleteUser and retention tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc.aio
from contextd.config import Settings
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
from contextd.store.engine.database import Database
from contextd.store.event_log.events import HISTORY_DIR
from contextd.store.memory.index import user_key
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc, users_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

FACT = "The user drinks green tea"


class GatedProvider:
    """Answers a chat turn with "first " and, once ``turn_gate`` is set, "second"; after-turn
    calls (no tools offered) answer one fact once ``after_turn_gate`` is set. Both gates
    start open; ``turn_streaming`` and ``after_turn_waiting`` say a call reached its gate."""

    name = "gated"
    default_model = "gated-model"
    capabilities = Capabilities(follows_instructions=True)

    def __init__(self) -> None:
        self.turn_gate = asyncio.Event()
        self.turn_gate.set()
        self.turn_streaming = asyncio.Event()
        self.after_turn_gate = asyncio.Event()
        self.after_turn_gate.set()
        self.after_turn_waiting = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        if request.tools:  # a chat turn: it always offers memory_search
            yield TextDelta("first ")
            self.turn_streaming.set()
            await self.turn_gate.wait()
            yield TextDelta("second")
        else:
            self.after_turn_waiting.set()
            await self.after_turn_gate.wait()
            yield TextDelta(json.dumps({"facts": [{"text": FACT}]}))
        yield Usage(10, 2)
        yield Finished("stop")

    async def aclose(self) -> None:
        return None


@dataclass
class Stubs:
    chat: chat_pb2_grpc.ChatServiceStub
    sessions: sessions_pb2_grpc.SessionServiceStub
    memories: memory_pb2_grpc.MemoryServiceStub
    users: users_pb2_grpc.UserServiceStub


@dataclass
class InProcess:
    running: contextd_server.RunningServer
    provider: GatedProvider
    stubs: Stubs

    @property
    def db(self) -> Database:
        return self.running.db

    async def logged_sessions(self) -> set[str]:
        """The sessions that have an event log: files, or rows on PostgreSQL."""
        if self.db.engine == "sqlite":
            return {path.stem for path in self.history.iterdir()}
        rows = await self.db.reader.execute_fetchall("SELECT session_id FROM event_lines")
        return {str(row[0]) for row in rows}

    @property
    def history(self) -> Path:
        return self.running.settings.data_dir / HISTORY_DIR


@asynccontextmanager
async def in_process(settings: Settings, provider: GatedProvider) -> AsyncIterator[InProcess]:
    """``settings``' server in this process, its model calls going to ``provider``."""
    original = wiring.make_provider
    wiring.make_provider = lambda *_, **__: provider  # type: ignore[assignment]
    try:
        running = await contextd_server.start(settings)
    finally:
        wiring.make_provider = original
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stubs = Stubs(
                chat_pb2_grpc.ChatServiceStub(channel),
                sessions_pb2_grpc.SessionServiceStub(channel),
                memory_pb2_grpc.MemoryServiceStub(channel),
                users_pb2_grpc.UserServiceStub(channel),
            )
            yield InProcess(running, provider, stubs)
    finally:
        provider.turn_gate.set()
        provider.after_turn_gate.set()
        await running.stop(0)


async def chat_turn(
    stubs: Stubs, user: str, session_id: str, text: str, metadata: Any = ()
) -> list[cpb.StreamChatResponse]:
    """One whole chat turn's events."""
    request = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=session_id), user_message=text
    )
    return [event async for event in stubs.chat.StreamChat(request, metadata=metadata)]


async def fill(stubs: Stubs, user: str, metadata: Any = ()) -> list[str]:
    """Give ``user`` two sessions with a chat turn each (messages, an event log, a session
    summary, memories with history), a compression summary and a memory of their own;
    the session ids."""
    ids = []
    for title in ("first", "second"):
        created = await stubs.sessions.CreateSession(
            spb.CreateSessionRequest(user_id=user, title=title), metadata=metadata
        )
        ids.append(created.session.id)
        turn = await chat_turn(
            stubs, user, created.session.id, f"{user}: I drink green tea", metadata
        )
        assert turn[-1].turn_completed.status == cpb.TURN_STATUS_OK
    listed = await stubs.sessions.ListMessages(
        spb.ListMessagesRequest(user_id=user, session_id=ids[0]), metadata=metadata
    )
    first = listed.messages[0].message.id
    await stubs.sessions.AddCompressionSummary(
        spb.AddCompressionSummaryRequest(
            user_id=user,
            session_id=ids[0],
            message_ids=[first],
            start_message_id=first,
            summary="an early question",
        ),
        metadata=metadata,
    )
    await stubs.memories.AddMemory(
        mpb.AddMemoryRequest(user_id=user, content=f"{user} lives in Paris"), metadata=metadata
    )
    return ids


# Each table's rows of one user (:user), and the search index terms of their memories.
_ROWS = {
    "sessions": "SELECT * FROM sessions WHERE user_id = :user ORDER BY id",
    "conversation": "SELECT * FROM conversation WHERE user_id = :user ORDER BY id",
    "message_tokens": "SELECT t.* FROM message_tokens t JOIN conversation c"
    " ON c.id = t.message_id WHERE c.user_id = :user ORDER BY 1, 2",
    "compression_summaries": "SELECT * FROM compression_summaries WHERE session_id IN"
    " (SELECT id FROM sessions WHERE user_id = :user) ORDER BY id",
    "session_summaries": "SELECT * FROM session_summaries WHERE user_id = :user"
    " ORDER BY session_id",
    "memories": "SELECT * FROM memories WHERE user_id = :user ORDER BY id",
    "memory_history": "SELECT * FROM memory_history WHERE user_id = :user ORDER BY id",
    "api_keys": "SELECT id, user_id FROM api_keys WHERE user_id = :user ORDER BY id",
    "memories_fts": "SELECT term, doc FROM memories_fts_vocab WHERE substr(term, 1, 16) = :key"
    " ORDER BY term",
}
# PostgreSQL keeps the terms in the memory's row: the user's memories holding any.
_PG_INDEX = (
    "SELECT id, CAST(search_terms AS TEXT) FROM memories WHERE user_id = :user"
    " AND search_terms != CAST('' AS TSVECTOR) ORDER BY id"
)


async def user_rows(db: Database, user: str) -> dict[str, list[tuple[Any, ...]]]:
    params = {"user": user, "key": user_key(user)}
    queries = dict(_ROWS)
    if db.engine != "sqlite":
        queries["memories_fts"] = _PG_INDEX
    return {
        table: [tuple(row) for row in await db.reader.execute_fetchall(sql, params)]
        for table, sql in queries.items()
    }


async def settle(seconds: float = 0.3) -> None:
    """Let background work that could still write get its chance."""
    await asyncio.sleep(seconds)

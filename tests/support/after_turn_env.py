"""AfterTurnRunner on a real SQLite store, with a scripted model for its background requests."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from contextd.app.after_turn import AfterTurnRunner, AfterTurnSettings, FinishedTurn
from contextd.app.memory_embedding import MeaningSearch
from contextd.core.messages import ChatMessage, Role
from contextd.providers.base import LANGUAGE_MODEL, Finished, ModelEvent, ModelRequest, TextDelta
from contextd.providers.echo import EchoProvider
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.memory.history import MemoryHistoryRepo
from contextd.store.memory.repository import MemoryRepo
from contextd.store.models import NewMessage, StoredMessage
from contextd.store.open import Store, open_store
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo

USER = "alice"


class ScriptedProvider:
    """A model that answers each kind of background request from a script.

    ``facts``, ``compression`` and ``summary`` are the replies (an exception is raised
    instead of replying); ``gate``, when given, holds every call until it is set.
    """

    name = "fake"
    default_model = "fake-model"
    capabilities = LANGUAGE_MODEL

    def __init__(
        self,
        facts: str | Exception = '{"facts": []}',
        summary: str | Exception = "A summary by the model.",
        compression: str | Exception = "A compression by the model.",
        gate: asyncio.Event | None = None,
    ) -> None:
        self.replies = {"facts": facts, "summary": summary, "compression": compression}
        self.gate = gate
        self.requests: list[tuple[str, ModelRequest]] = []

    @staticmethod
    def kind(request: ModelRequest) -> str:
        system = request.messages[0].content
        if "extract long-term memories" in system:
            return "facts"
        if "compress the earlier part" in system:
            return "compression"
        return "summary"

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        kind = self.kind(request)
        self.requests.append((kind, request))
        if self.gate is not None:
            await self.gate.wait()
        reply = self.replies[kind]
        if isinstance(reply, Exception):
            raise reply
        for i in range(0, len(reply), 7):
            yield TextDelta(reply[i : i + 7])
        yield Finished("stop")

    async def aclose(self) -> None:
        return None

    def prompts(self, kind: str) -> list[str]:
        return [r.messages[-1].content for k, r in self.requests if k == kind]


class Env:
    def __init__(self, store: Store, meaning: MeaningSearch | None = None) -> None:
        self.store = store
        self.db = db = store.db
        self.sessions = SessionRepo(db)
        self.conversation = ConversationRepo(db)
        self.meaning = meaning
        self.memories = (
            MemoryRepo(db, store.memory_index, meaning=meaning.ranker, changed=meaning.worker.wake)
            if meaning is not None
            else MemoryRepo(db, store.memory_index)
        )
        self.summaries = SummaryRepo(db)
        self.history = MemoryHistoryRepo(db, self.memories)
        self.runners: list[AfterTurnRunner] = []

    def runner(self, provider: object | None = None, **settings: object) -> AfterTurnRunner:
        runner = AfterTurnRunner(
            provider or EchoProvider(),  # type: ignore[arg-type]
            self.memories,
            self.summaries,
            self.conversation,
            self.history,
            AfterTurnSettings(**settings),  # type: ignore[arg-type]
        )
        self.runners.append(runner)
        return runner

    async def session(self, user: str = USER) -> str:
        return (await self.sessions.create(user)).id

    async def turn(
        self, session_id: str, index: int, text: str, answer: str = "OK.", user: str = USER
    ) -> tuple[StoredMessage, FinishedTurn]:
        stored = await self.conversation.append(
            session_id,
            user,
            [
                NewMessage(ChatMessage(Role.USER, text), turn_index=index),
                NewMessage(ChatMessage(Role.ASSISTANT, answer), turn_index=index),
            ],
        )
        return stored[0], FinishedTurn(session_id, user, index)

    async def contents(self, user: str = USER) -> list[str]:
        memories, _ = await self.memories.list_memories(user, 200)
        return sorted(m.content for m in memories)

    async def session_summary(self, session_id: str) -> str | None:
        rows = list(
            await self.db.reader.execute_fetchall(
                "SELECT summary FROM session_summaries WHERE session_id = ?", (session_id,)
            )
        )
        return str(rows[0][0]) if rows else None


@asynccontextmanager
async def env_in(
    directory: Path, meaning: Callable[[Database], MeaningSearch] | None = None
) -> AsyncIterator[Env]:
    """An Env on a new SQLite store in the data directory ``directory``, its memories
    searched by ``meaning`` (made for the database) when given; its runners and store
    closed after."""
    store = await open_store("", directory)
    environment = Env(store, meaning(store.db) if meaning is not None else None)
    try:
        yield environment
    finally:
        for runner in environment.runners:
            await runner.aclose()
        await store.close()


async def run(runner: AfterTurnRunner, turn: FinishedTurn) -> None:
    runner.schedule(turn)
    await runner.idle()


def after_turn_records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "contextd.after_turn" and r.levelno >= level]

"""A ChatApp wired in-process to a real database (the SQLite file of ``data_dir``, or the
PostgreSQL database of ``database_url``) and a recording echo provider."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from contextd.app.chat import ChatApp, ChatEvent, ChatTurnRequest
from contextd.app.chat.interrupted import InterruptedTurns
from contextd.app.chat.session_lease import SessionTurns
from contextd.app.chat.step_loop import StepLoop
from contextd.app.chat.turn_setup import TurnKit, TurnSetup
from contextd.app.scope import Caller
from contextd.app.session_build_request import LayerDefaults
from contextd.app.session_context import SessionContextBuilder
from contextd.app.sessions import SessionsApp
from contextd.core.tokens import Tokenizer, TokenizerRegistry
from contextd.providers.base import ModelEvent, ModelRequest, ToolSpec
from contextd.providers.echo import EchoProvider
from contextd.store.catalog import CatalogRepo
from contextd.store.conversation import ConversationRepo
from contextd.store.event_log.events import EventStore
from contextd.store.memory.repository import MemoryRepo
from contextd.store.open import open_store
from contextd.store.partial_answers import PartialAnswerRepo
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo


class RecordingEcho(EchoProvider):
    """The echo provider, keeping every request it answers."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self.requests.append(request)
        async for event in super().stream(request):
            yield event


@dataclass
class App:
    chat: ChatApp
    sessions: SessionsApp
    conversation: ConversationRepo
    events: EventStore
    partials: PartialAnswerRepo
    memories: MemoryRepo
    provider: RecordingEcho
    tokenizer: Tokenizer

    def request(
        self,
        text: str = "",
        session_id: str = "",
        tools: Sequence[ToolSpec] = (),
        tool_results: Sequence[tuple[str, str]] = (),
    ) -> ChatTurnRequest:
        return ChatTurnRequest(
            Caller("alice"),
            session_id,
            text,
            self.tokenizer,
            tools=tools,
            tool_results=tool_results,
            react=True,
        )

    async def turn(self, req: ChatTurnRequest) -> list[ChatEvent]:
        return [event async for event in self.chat.run(req)]


@asynccontextmanager
async def in_process(data_dir: Path, database_url: str = "") -> AsyncIterator[App]:
    store = await open_store(database_url, data_dir)
    db = store.db
    tokenizers = TokenizerRegistry("cl100k_base")
    memories, summaries = MemoryRepo(db, store.memory_index), SummaryRepo(db)
    events = store.event_log()
    conversation = ConversationRepo(db)
    provider = RecordingEcho()
    partials = PartialAnswerRepo(db, lease_seconds=15.0)
    turns = SessionTurns(partials, InterruptedTurns(partials, conversation, events, tokenizers))
    sessions = SessionsApp(
        SessionRepo(db),
        conversation,
        summaries,
        memories,
        tokenizers,
        events,
        turns,
        provider.name,
    )
    defaults = LayerDefaults("You are a test.", "", True, 5, 3)
    builder = SessionContextBuilder(defaults, sessions, CatalogRepo(db), memories, summaries)
    kit = TurnKit(
        events=events,
        conversation=conversation,
        partials=partials,
        tokenizers=tokenizers,
        builder=builder,
        memories=memories,
        max_prompt_tokens=8000,
        blank_user_turns=provider.capabilities.carries_blank_user_turns,
    )
    setup = TurnSetup(
        sessions=sessions,
        conversation=conversation,
        events=events,
        turns=turns,
        kit=kit,
        provider=provider,
        warn_prompt_tokens=6000,
    )
    chat = ChatApp(setup, StepLoop(provider, max_steps=4), turns, events)
    tokenizer = tokenizers.get("cl100k_base")
    try:
        yield App(chat, sessions, conversation, events, partials, memories, provider, tokenizer)
    finally:
        await events.aclose()
        await store.close()

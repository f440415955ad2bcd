"""AfterTurnRunner on a real SQLite database: memories with provenance and history, session
and compression summaries, failures that never reach the chat, scheduling and shutdown; and
the whole path through a live server."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest
from contextd.app.after_turn import AfterTurnRunner, AfterTurnSettings
from contextd.app.chat import FinishedTurn
from contextd.app.scope import Caller
from contextd.app.sessions import SessionsApp
from contextd.config import Settings
from contextd.core.memory_facts import RULE_METHOD
from contextd.core.messages import ChatMessage, Role
from contextd.core.tokens import TokenizerRegistry
from contextd.providers.base import (
    LANGUAGE_MODEL,
    Finished,
    ModelEvent,
    ModelRequest,
    TextDelta,
)
from contextd.providers.echo import EchoProvider
from contextd.providers.errors import ProviderUnavailable
from contextd.store.conversation import ConversationRepo
from contextd.store.db import Database
from contextd.store.events import EventLog
from contextd.store.memories import MemoryRepo
from contextd.store.memory_history import MemoryHistoryRepo
from contextd.store.models import NewMessage, StoredMessage
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, memory_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb

from tests.conftest import start_server

USER = "alice"

# --- fakes and helpers ----------------------------------------------------------------------


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
        yield Finished("stop", "stop")

    async def aclose(self) -> None:
        return None

    def prompts(self, kind: str) -> list[str]:
        return [r.messages[-1].content for k, r in self.requests if k == kind]


class Env:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.sessions = SessionRepo(db)
        self.conversation = ConversationRepo(db)
        self.memories = MemoryRepo(db)
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


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    db = await Database.open(tmp_path / "contextd.sqlite3")
    environment = Env(db)
    yield environment
    for runner in environment.runners:
        await runner.aclose()
    await db.close()


async def run(runner: AfterTurnRunner, turn: FinishedTurn) -> None:
    runner.schedule(turn)
    await runner.idle()


def after_turn_records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "contextd.after_turn" and r.levelno >= level]


# --- the rule fallback (echo provider) -------------------------------------------------------


async def test_echo_fallback_stores_facts_with_provenance(env: Env) -> None:
    runner = env.runner()
    assert not runner.use_model
    sid = await env.session()
    user_message, turn = await env.turn(sid, 1, "你好！我喜欢喝咖啡，我住在上海。", "echo: …")
    await run(runner, turn)

    assert await env.contents() == ["我住在上海", "我喜欢喝咖啡"]
    [hit] = await env.memories.search(USER, "咖啡")
    memory = hit.memory
    assert (memory.source_session_id, memory.source_message_id) == (sid, user_message.id)
    [change] = await env.history.for_memory(memory.id)
    assert (change.action, change.method, change.old_content, change.new_content) == (
        "add",
        RULE_METHOD,
        "",
        "我喜欢喝咖啡",
    )
    assert (change.source_session_id, change.source_message_id) == (sid, user_message.id)
    assert runner.stats.facts_added == 2 and runner.stats.failures == 0


async def test_duplicates_are_not_stored_twice(env: Env) -> None:
    runner = env.runner()
    sid = await env.session()
    _, first = await env.turn(sid, 1, "I like green tea.")
    await run(runner, first)
    [before] = (await env.memories.list_memories(USER))[0]
    _, second = await env.turn(sid, 2, "Honestly, i like green tea!")
    await run(runner, second)
    [after] = (await env.memories.list_memories(USER))[0]
    assert after.id == before.id and after.content == "I like green tea"
    assert after.updated_at >= before.updated_at
    assert len(await env.history.for_user(USER)) == 1  # only the add
    assert (runner.stats.facts_added, runner.stats.facts_restated) == (1, 1)


async def test_fallback_replacement_keeps_the_old_text_in_history(env: Env) -> None:
    runner = env.runner()
    sid = await env.session()
    _, first = await env.turn(sid, 1, "我叫小明")
    await run(runner, first)
    [original] = (await env.memories.list_memories(USER))[0]
    user_message, second = await env.turn(sid, 2, "其实我的名字是小红")
    await run(runner, second)

    [memory] = (await env.memories.list_memories(USER))[0]
    assert (memory.id, memory.content) == (original.id, "我叫小红")  # in place, same id
    assert memory.source_message_id == user_message.id
    add, update = await env.history.for_memory(memory.id)
    assert (add.action, add.new_content) == ("add", "我叫小明")
    assert (update.action, update.old_content, update.new_content, update.method) == (
        "update",
        "我叫小明",
        "我叫小红",
        RULE_METHOD,
    )
    assert update.source_message_id == user_message.id
    # The index follows: the new name is found, the old one is not.
    assert [h.memory.id for h in await env.memories.search(USER, "小红")] == [memory.id]
    assert await env.memories.search(USER, "小明") == []
    assert runner.stats.facts_updated == 1


async def test_questions_and_other_people_are_not_remembered(env: Env) -> None:
    runner = env.runner()
    sid = await env.session()
    for index, text in enumerate(["我叫什么?", "What do I like?", "他喜欢喝茶"], 1):
        _, turn = await env.turn(sid, index, text)
        await run(runner, turn)
    assert await env.contents() == []


async def test_users_do_not_share_memories(env: Env) -> None:
    runner = env.runner()
    _, alice = await env.turn(await env.session(), 1, "I live in Paris")
    _, bob = await env.turn(await env.session("bob"), 1, "I live in Rome", user="bob")
    await run(runner, alice)
    await run(runner, bob)
    assert await env.contents() == ["I live in Paris"]
    assert await env.contents("bob") == ["I live in Rome"]


async def test_echo_session_summary_is_an_extract(env: Env) -> None:
    runner = env.runner()
    sid = await env.session()
    _, first = await env.turn(sid, 1, "我想学做红烧肉", "echo: 好的")
    await run(runner, first)
    assert (
        await env.session_summary(sid)
        == "（摘录，未经模型总结）开始：「我想学做红烧肉」 → 「echo: 好的」"
    )
    _, second = await env.turn(sid, 2, "需要多久？", "大约一个小时")
    await run(runner, second)
    summary = await env.session_summary(sid)
    assert summary == (
        "（摘录，未经模型总结）开始：「我想学做红烧肉」；最近：「需要多久？」 → 「大约一个小时」"
    )
    # The recent_sessions layer of the user's other sessions reads it.
    other = await env.session()
    [recent] = await env.summaries.recent_session_summaries(USER, other)
    assert recent.session_id == sid and recent.summary == summary


async def test_a_summary_the_host_set_is_kept_after_later_turns(env: Env, tmp_path: Path) -> None:
    runner = env.runner()
    sid = await env.session()
    _, first = await env.turn(sid, 1, "Plan the budget", "echo: ok")
    await run(runner, first)
    assert "Plan the budget" in await env.session_summary(sid)  # automatic so far
    events = EventLog(tmp_path / "history")
    app = SessionsApp(
        env.sessions, env.conversation, env.summaries, env.memories, TokenizerRegistry(), events
    )
    await app.set_session_summary(Caller(USER), sid, "Q3 budget plan")  # SetSessionSummary
    await events.aclose()
    _, second = await env.turn(sid, 2, "Add travel costs", "echo: added")
    await run(runner, second)
    assert await env.session_summary(sid) == "Q3 budget plan"
    assert runner.stats.session_summaries == 1  # the second turn's was not written


# --- the model path -------------------------------------------------------------------------


async def test_model_facts_are_stored_with_the_model_as_method(env: Env) -> None:
    memory, _ = await env.memories.add(USER, "I live in Paris")
    provider = ScriptedProvider(
        facts=json.dumps(
            {
                "facts": [
                    {"text": "I live in Berlin", "replaces": "I live in Paris"},
                    {"text": "I have a cat named Tom"},
                    {"text": 7},
                ]
            }
        )
    )
    runner = env.runner(provider)
    assert runner.use_model
    sid = await env.session()
    user_message, turn = await env.turn(
        sid, 1, "I moved from Paris to Berlin last month with my cat Tom", "Nice!"
    )
    await run(runner, turn)

    [prompt] = provider.prompts("facts")
    assert json.dumps(["I live in Paris"]) in prompt  # the related memory was shown
    assert "I moved from Paris to Berlin" in prompt and "Nice!" in prompt
    assert await env.contents() == ["I have a cat named Tom", "I live in Berlin"]
    [update] = await env.history.for_memory(memory.id)
    assert (update.action, update.old_content, update.new_content, update.method) == (
        "update",
        "I live in Paris",
        "I live in Berlin",
        "llm:fake-model",
    )
    [cat] = await env.memories.search(USER, "cat Tom")
    [add] = await env.history.for_memory(cat.memory.id)
    assert (add.action, add.method, add.source_session_id, add.source_message_id) == (
        "add",
        "llm:fake-model",
        sid,
        user_message.id,
    )
    assert await env.session_summary(sid) == "A summary by the model."


async def test_model_cannot_replace_a_memory_it_was_not_shown(env: Env) -> None:
    await env.memories.add(USER, "I like tea")  # unrelated to the message: not shown
    provider = ScriptedProvider(
        facts='{"facts": [{"text": "I enjoy chess", "replaces": "I like tea"}]}'
    )
    runner = env.runner(provider)
    _, turn = await env.turn(await env.session(), 1, "chess is my hobby")
    await run(runner, turn)
    assert await env.contents() == ["I enjoy chess", "I like tea"]


async def test_replacement_by_an_existing_text_merges(env: Env) -> None:
    old, _ = await env.memories.add(USER, "I live in Paris")
    kept, _ = await env.memories.add(USER, "I live in Berlin")
    provider = ScriptedProvider(
        facts='{"facts": [{"text": "I live in Berlin.", "replaces": "I live in Paris"}]}'
    )
    runner = env.runner(provider)
    _, turn = await env.turn(await env.session(), 1, "I live in Berlin now, not Paris")
    await run(runner, turn)
    # "I live in Berlin." restates memory `kept`: a RESTATE, nothing replaced.
    assert await env.contents() == ["I live in Berlin", "I live in Paris"]
    # Replacing with a text another memory already holds removes the old one, recorded.
    replaced = await env.history.replace(old.id, USER, "I live in Paris", "I live in Berlin", "x")
    assert replaced is not None and replaced.memory.id == kept.id
    assert replaced.change is not None and replaced.change.action == "merge"
    assert replaced.change.replaced_memory_id == old.id
    assert replaced.change.old_content == "I live in Paris"
    assert await env.contents() == ["I live in Berlin"]
    assert await env.memories.get(old.id) is None


async def test_replace_refuses_a_memory_changed_since_it_was_read(env: Env) -> None:
    memory, _ = await env.memories.add(USER, "I live in Paris")
    history = env.history
    assert await history.replace(memory.id, USER, "I live in Rome", "I live in Oslo", "x") is None
    assert await history.replace(memory.id, "bob", "I live in Paris", "I live in Oslo", "x") is None
    assert await history.replace(memory.id + 99, USER, "x", "y", "x") is None
    same = await history.replace(memory.id, USER, "I live in Paris", "i live in paris.", "x")
    assert same is not None and same.change is None  # the same memory: only refreshed
    assert await env.contents() == ["I live in Paris"]
    with pytest.raises(ValueError):
        await history.replace(memory.id, USER, "I live in Paris", "  ", "x")


async def test_deleting_a_memory_deletes_its_history(env: Env) -> None:
    runner = env.runner()
    _, turn = await env.turn(await env.session(), 1, "我叫小明")
    await run(runner, turn)
    _, turn = await env.turn(turn.session_id, 2, "我叫小红")
    await run(runner, turn)
    [memory] = (await env.memories.list_memories(USER))[0]
    assert len(await env.history.for_memory(memory.id)) == 2
    assert await env.memories.delete(memory.id)
    assert await env.history.for_memory(memory.id) == []
    assert await env.history.for_user(USER) == []
    async with env.db.transaction() as conn:  # the search index is still consistent
        await conn.execute(
            "INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 0)"
        )


@pytest.mark.parametrize(
    "facts",
    [
        "I cannot help with that.",
        '{"facts": "I like tea"}',
        ProviderUnavailable("fake", "connection refused"),
        RuntimeError("a bug in the provider"),
    ],
)
async def test_bad_model_answers_fall_back_to_rules(
    env: Env, caplog: pytest.LogCaptureFixture, facts: str | Exception
) -> None:
    provider = ScriptedProvider(facts=facts)
    runner = env.runner(provider)
    _, turn = await env.turn(await env.session(), 1, "My name is Alice")
    with caplog.at_level(logging.WARNING, "contextd.after_turn"):
        await run(runner, turn)
    [memory] = (await env.memories.list_memories(USER))[0]
    assert memory.content == "My name is Alice"
    [change] = await env.history.for_memory(memory.id)
    assert change.method == RULE_METHOD
    assert runner.stats.model_fallbacks == 1 and runner.stats.failures == 0
    [record] = after_turn_records(caplog, logging.WARNING)
    assert "using the rule fallback" in record.getMessage()


async def test_a_failing_provider_is_logged_and_never_raised(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    error = ProviderUnavailable("fake", "down")
    provider = ScriptedProvider(facts=error, summary=error, compression=error)
    runner = env.runner(provider, compress_after_messages=2, compress_keep_last=1)
    sid = await env.session()
    await env.turn(sid, 1, "first question")
    _, turn = await env.turn(sid, 2, "I like jazz")
    with caplog.at_level(logging.WARNING, "contextd.after_turn"):
        await run(runner, turn)
    # Everything fell back, nothing was raised, each fallback was logged.
    assert await env.contents() == ["I like jazz"]
    summary = await env.session_summary(sid)
    assert summary is not None and summary.startswith("(extract, not a model summary)")
    compression = await env.summaries.active_compression(sid)
    assert compression is not None and compression.summary.startswith("(extract")
    assert runner.stats.model_fallbacks == 3
    assert len(after_turn_records(caplog, logging.WARNING)) == 3


async def test_storage_errors_are_logged_and_the_other_parts_still_run(
    env: Env, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(env.summaries, "upsert_session_summary", broken)
    monkeypatch.setattr(env.history, "record_add", broken)
    runner = env.runner()
    sid = await env.session()
    _, turn = await env.turn(sid, 1, "I like jazz. I live in Oslo.")
    with caplog.at_level(logging.ERROR, "contextd.after_turn"):
        await run(runner, turn)
    assert await env.contents() == ["I like jazz", "I live in Oslo"]
    errors = after_turn_records(caplog, logging.ERROR)
    assert [r.getMessage() for r in errors] == [
        "after-turn memory write failed",
        "after-turn memory write failed",
        "after-turn session summary failed",
    ]
    assert all(r.exc_info and "disk on fire" in str(r.exc_info[1]) for r in errors)
    assert getattr(errors[0], "session_id", None) == sid
    assert runner.stats.failures == 3


async def test_a_turn_that_is_not_stored_is_skipped(env: Env) -> None:
    runner = env.runner()
    sid = await env.session()
    await run(runner, FinishedTurn(sid, USER, 5))
    await run(runner, FinishedTurn("no-such-session", USER, 1))
    assert runner.stats.finished == 2 and runner.stats.failures == 0
    assert await env.session_summary(sid) is None


async def test_model_session_summary_is_cleaned_and_sees_the_session(env: Env) -> None:
    provider = ScriptedProvider(summary="```\nUser plans a trip to Japan.\n\n\nOpen: dates.\n```")
    runner = env.runner(provider)
    sid = await env.session()
    await env.turn(sid, 1, "Help me plan a trip to Japan")
    _, turn = await env.turn(sid, 2, "What about April?", "April is cherry blossom season.")
    await run(runner, turn)
    assert await env.session_summary(sid) == "User plans a trip to Japan.\nOpen: dates."
    [prompt] = provider.prompts("summary")
    assert "Help me plan a trip to Japan" in prompt and "cherry blossom" in prompt


# --- compression ------------------------------------------------------------------------------


async def test_compression_past_the_threshold_with_the_fallback(env: Env) -> None:
    runner = env.runner(compress_after_messages=6, compress_keep_last=2)
    sid = await env.session()
    stored: list[StoredMessage] = []
    for index in range(1, 4):  # 6 messages: not over the threshold
        message, turn = await env.turn(sid, index, f"question {index}", f"answer {index}")
        stored.append(message)
        await run(runner, turn)
    assert await env.summaries.active_compression(sid) is None

    message, turn = await env.turn(sid, 4, "question 4", "answer 4")  # 8 messages
    await run(runner, turn)
    first = await env.summaries.active_compression(sid)
    assert first is not None
    all_ids = tuple(m.id for m in (await env.conversation.list_messages(sid))[0])
    assert first.message_ids == all_ids[:6] and first.start_message_id == all_ids[0]
    assert first.summary.startswith("(extract, not a model summary: 6 earlier messages)")
    assert "- user: question 1" in first.summary and "- assistant: answer 3" in first.summary
    assert "question 4" not in first.summary

    for index in range(5, 8):  # uncovered: 4, 6, 8 messages; compressed again at 8
        _, turn = await env.turn(sid, index, f"question {index}", f"answer {index}")
        await run(runner, turn)
    second = await env.summaries.active_compression(sid)
    assert second is not None and second.id != first.id
    all_ids = tuple(m.id for m in (await env.conversation.list_messages(sid))[0])
    assert second.message_ids == all_ids[:12] and second.start_message_id == all_ids[0]
    assert "question 1" in second.summary  # the previous summary is folded in
    assert "question 6" in second.summary and "question 7" not in second.summary
    assert runner.stats.compressions == 2


async def test_compression_by_the_model(env: Env) -> None:
    provider = ScriptedProvider(compression="```\nEarlier: the user asked about 1-3.\n```")
    runner = env.runner(provider, compress_after_messages=4, compress_keep_last=2)
    sid = await env.session()
    for index in range(1, 4):
        _, turn = await env.turn(sid, index, f"question {index}", f"answer {index}")
    await run(runner, turn)
    active = await env.summaries.active_compression(sid)
    assert active is not None and active.summary == "Earlier: the user asked about 1-3."
    assert len(active.message_ids) == 4
    [prompt] = provider.prompts("compression")
    assert "question 1" in prompt and "answer 2" in prompt and "question 3" not in prompt
    # The session summary was written after it and saw it.
    [summary_prompt] = provider.prompts("summary")
    assert "Earlier: the user asked about 1-3." in summary_prompt


# --- scheduling and shutdown ----------------------------------------------------------------


async def test_schedule_returns_at_once_and_the_work_happens_after(env: Env) -> None:
    gate = asyncio.Event()
    provider = ScriptedProvider(facts='{"facts": [{"text": "I like tea"}]}', gate=gate)
    runner = env.runner(provider)
    _, turn = await env.turn(await env.session(), 1, "tea please")
    started = time.perf_counter()
    assert runner.schedule(turn) is None  # type: ignore[func-returns-value]
    assert time.perf_counter() - started < 0.05
    assert runner.pending == 1
    await asyncio.sleep(0.05)
    assert await env.contents() == [] and runner.pending == 1  # held by the model
    gate.set()
    await runner.idle()
    assert await env.contents() == ["I like tea"] and runner.pending == 0


async def test_aclose_waits_for_pending_work(env: Env) -> None:
    gate = asyncio.Event()
    provider = ScriptedProvider(facts='{"facts": [{"text": "I like tea"}]}', gate=gate)
    runner = env.runner(provider)
    _, turn = await env.turn(await env.session(), 1, "tea please")
    runner.schedule(turn)
    asyncio.get_running_loop().call_later(0.1, gate.set)
    await runner.aclose()
    assert await env.contents() == ["I like tea"] and runner.pending == 0
    runner.schedule(turn)  # refused after close, without raising
    assert runner.pending == 0 and runner.stats.dropped == 1


async def test_aclose_cancels_what_outlives_its_timeout(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    provider = ScriptedProvider(gate=asyncio.Event())  # never opens
    runner = env.runner(provider, shutdown_timeout=0.1)
    _, turn = await env.turn(await env.session(), 1, "I like tea")
    runner.schedule(turn)
    with caplog.at_level(logging.WARNING, "contextd.after_turn"):
        await asyncio.wait_for(runner.aclose(), 5)
    assert runner.pending == 0
    assert any("cancelled at shutdown" in r.getMessage() for r in caplog.records)


async def test_model_calls_time_out(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    provider = ScriptedProvider(gate=asyncio.Event())  # never answers
    runner = env.runner(provider, model_timeout=0.05)
    sid = await env.session()
    _, turn = await env.turn(sid, 1, "I like tea")
    await asyncio.wait_for(run(runner, turn), 5)
    assert await env.contents() == ["I like tea"]  # the rule fallback
    assert runner.stats.model_fallbacks == 2  # facts and the session summary


async def test_too_many_pending_turns_are_dropped(env: Env) -> None:
    provider = ScriptedProvider(gate=asyncio.Event())
    runner = env.runner(provider, max_pending=2, shutdown_timeout=0)
    _, turn = await env.turn(await env.session(), 1, "hello")
    for _ in range(3):
        runner.schedule(turn)
    assert runner.pending == 2 and runner.stats.dropped == 1


async def test_one_session_runs_in_turn_order_and_sessions_in_parallel(env: Env) -> None:
    order: list[str] = []
    gate = asyncio.Event()

    class Recording(ScriptedProvider):
        async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
            text = request.messages[-1].content
            order.append(next(w for w in ("one", "two", "three") if w in text))
            await gate.wait()
            yield TextDelta('{"facts": []}')

    runner = env.runner(Recording(), session_summary=False, max_concurrency=2)
    a, b = await env.session(), await env.session()
    _, one = await env.turn(a, 1, "one")
    _, two = await env.turn(a, 2, "two")
    _, three = await env.turn(b, 1, "three")
    for turn in (one, two, three):
        runner.schedule(turn)
    await asyncio.sleep(0.05)
    assert order == ["one", "three"]  # "two" waits for "one" of its session
    gate.set()
    await runner.idle()
    assert order == ["one", "three", "two"]


def test_schedule_without_an_event_loop_does_not_raise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runner = AfterTurnRunner(
        EchoProvider(),
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
    )
    with caplog.at_level(logging.ERROR, "contextd.after_turn"):
        runner.schedule(FinishedTurn("s", "u", 1))
    assert runner.pending == 0
    assert any("could not be scheduled" in r.getMessage() for r in caplog.records)


def test_settings() -> None:
    with pytest.raises(ValueError, match="compress_after_messages"):
        AfterTurnSettings(compress_after_messages=5, compress_keep_last=5)
    with pytest.raises(ValueError, match="max_concurrency"):
        AfterTurnSettings(max_concurrency=0)
    off = AfterTurnSettings.from_settings(Settings(memory_enabled=False, provider_timeout=5))
    assert (off.memories, off.session_summary, off.compression) == (False, False, True)
    assert off.model_timeout == 5
    assert AfterTurnRunner(ScriptedProvider(), *[None] * 4).use_model  # type: ignore[arg-type]
    forced = AfterTurnSettings(use_model=True)
    assert AfterTurnRunner(EchoProvider(), *[None] * 4, forced).use_model  # type: ignore[arg-type,call-arg]


# --- through a live server ------------------------------------------------------------------


def poll(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def test_stream_chat_then_search_memories_finds_the_fact(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data")
    try:
        user = f"u-{uuid.uuid4().hex[:8]}"
        with grpc.insecure_channel(server.address) as channel:
            chat = chat_pb2_grpc.ChatServiceStub(channel)
            memory = memory_pb2_grpc.MemoryServiceStub(channel)
            request = cpb.StreamChatRequest(
                session=pb.SessionContext(user_id=user), user_message="我喜欢喝咖啡"
            )
            events = list(chat.StreamChat(request))
            assert events[-1].turn_completed.status == cpb.TURN_STATUS_OK

            def found() -> bool:
                reply = memory.SearchMemories(mpb.SearchMemoriesRequest(user_id=user, query="咖啡"))
                return [r.memory.content for r in reply.results] == ["我喜欢喝咖啡"]

            assert poll(found)
            [stored] = memory.ListMemories(mpb.ListMemoriesRequest(user_id=user)).memories
            assert stored.source_session_id == events[0].turn_started.session_id
            assert stored.source_message_id == events[0].turn_started.user_message_id

            # Said again in a second turn: still one memory.
            again = cpb.StreamChatRequest(
                session=pb.SessionContext(
                    user_id=user, session_id=events[0].turn_started.session_id
                ),
                user_message="我喜欢喝咖啡！",
            )
            list(chat.StreamChat(again))
            time.sleep(0.3)
            listed = memory.ListMemories(mpb.ListMemoriesRequest(user_id=user)).memories
            assert [m.content for m in listed] == ["我喜欢喝咖啡"]
    finally:
        assert server.stop() == 0
    assert not [
        e
        for e in server.logs()
        if e.get("logger") == "contextd.after_turn" and e.get("level") == "ERROR"
    ]

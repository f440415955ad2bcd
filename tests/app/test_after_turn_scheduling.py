"""AfterTurnRunner: compression, scheduling and shutdown; the whole path through a server."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Callable
from pathlib import Path

import grpc
import pytest
from contextd.app.after_turn import AfterTurnRunner, AfterTurnSettings
from contextd.app.chat import FinishedTurn
from contextd.config import Settings
from contextd.providers.base import ModelEvent, ModelRequest, TextDelta
from contextd.providers.echo import EchoProvider
from contextd.store.models import StoredMessage
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, memory_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb

from tests.support.after_turn_env import Env, ScriptedProvider, run
from tests.support.server import start_server

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

"""AfterTurnRunner: scheduling, the guard around each part of the work, shutdown; the
whole path through a server."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Callable
from pathlib import Path

import grpc
import pytest
from contextd.app.after_turn import AfterTurnRunner, AfterTurnSettings, FinishedTurn
from contextd.config import Settings
from contextd.core.editing.compaction import CompactionSettings
from contextd.providers.base import ModelEvent, ModelRequest, TextDelta
from contextd.providers.echo import EchoProvider
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, memory_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb

from tests.support.after_turn_env import USER, Env, ScriptedProvider, after_turn_records, run
from tests.support.server import start_server


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
    with pytest.raises(ValueError, match=r"compaction\.keep_messages"):
        AfterTurnSettings(compaction=CompactionSettings(keep_messages=0))
    with pytest.raises(ValueError, match="max_concurrency"):
        AfterTurnSettings(max_concurrency=0)
    off = AfterTurnSettings.from_settings(Settings(memory_enabled=False, provider_timeout=5))
    assert (off.memories, off.session_summary, off.compression) == (False, False, True)
    assert off.model_timeout == 5
    assert AfterTurnRunner(ScriptedProvider(), *[None] * 4).use_model  # type: ignore[arg-type]
    forced = AfterTurnSettings(use_model=True)
    assert AfterTurnRunner(EchoProvider(), *[None] * 4, forced).use_model  # type: ignore[arg-type,call-arg]


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

"""--retention-days with a real server and its SQLite file: an inactive session goes with
its messages, summaries and event log, a recent one stays, memories stay, and a session
with a turn in progress is never purged under it."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import grpc
import grpc.aio
import pytest
from contextd.app import retention
from contextd.store.event_log.events import HISTORY_DIR
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb
from contextd.v1 import sessions_pb2_grpc

from tests.support.erasure import GatedProvider, fill, in_process, settle, user_rows
from tests.support.server import ServerProcess, start_server
from tests.support.settings import terms_only

DAY = 86400.0


async def logged(proc: ServerProcess, msg: str) -> list[dict[str, object]]:
    """The server's log lines ``msg``, once there is one (20 s at most)."""
    deadline = time.monotonic() + 20
    while True:
        lines = proc.logs(msg)
        if lines or time.monotonic() > deadline:
            return lines
        await asyncio.sleep(0.05)


def age(data_dir: Path, session_id: str, days: float) -> None:
    """Make the session's last activity ``days`` ago, in the stopped server's file."""
    with sqlite3.connect(data_dir / "contextd.sqlite3") as db:
        db.execute(
            "UPDATE sessions SET updated_at = ? WHERE id = ?",
            (time.time() - days * DAY, session_id),
        )


async def test_an_inactive_session_is_purged_at_start_and_a_recent_one_stays(
    tmp_path: Path,
) -> None:
    async with in_process(terms_only(port=0, data_dir=tmp_path), GatedProvider()) as live:
        [old, recent] = await fill(live.stubs, "alice")
        [bobs_old, _] = await fill(live.stubs, "bob")
        await settle()
        before = await user_rows(live.db, "alice")
        old_messages = [row for row in before["conversation"] if row[1] == old]
    for session_id in (old, bobs_old):
        age(tmp_path, session_id, 10)
    age(tmp_path, recent, 6)

    proc = start_server(tmp_path, "--retention-days", "7")
    try:
        [line] = await logged(proc, "retention purge")
        assert line["sessions"] == 2 and line["event_logs"] == 2
        assert line["messages"] == 2 * len(old_messages) and line["days"] == 7
        async with grpc.aio.insecure_channel(proc.address) as channel:
            sessions = sessions_pb2_grpc.SessionServiceStub(channel)
            listed = await sessions.ListSessions(spb.ListSessionsRequest(user_id="alice"))
            assert [s.id for s in listed.sessions] == [recent]
            with pytest.raises(grpc.aio.AioRpcError) as gone:
                await sessions.GetSession(spb.GetSessionRequest(user_id="alice", session_id=old))
            assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        assert proc.stop() == 0
    assert not (tmp_path / HISTORY_DIR / f"{old}.jsonl").exists()
    assert not (tmp_path / HISTORY_DIR / f"{bobs_old}.jsonl").exists()
    assert (tmp_path / HISTORY_DIR / f"{recent}.jsonl").exists()
    assert list((tmp_path / "log-removals").iterdir()) == []
    with sqlite3.connect(tmp_path / "contextd.sqlite3") as db:
        for table in ("conversation", "compression_summaries", "session_summaries"):
            count = db.execute(f"SELECT COUNT(*) FROM {table} WHERE session_id = ?", (old,))
            assert count.fetchone() == (0,), table
        # The users' memories and their history stay.
        memories = db.execute("SELECT COUNT(*) FROM memories WHERE user_id = 'alice'")
        assert memories.fetchone() == (len(before["memories"]),)
        history = db.execute("SELECT COUNT(*) FROM memory_history WHERE user_id = 'alice'")
        assert history.fetchone() == (len(before["memory_history"]),)


async def test_nothing_is_purged_without_the_flag(tmp_path: Path) -> None:
    async with in_process(terms_only(port=0, data_dir=tmp_path), GatedProvider()) as live:
        [old, _] = await fill(live.stubs, "alice")
        await settle()
    age(tmp_path, old, 10_000)
    proc = start_server(tmp_path)
    try:
        async with grpc.aio.insecure_channel(proc.address) as channel:
            sessions = sessions_pb2_grpc.SessionServiceStub(channel)
            await sessions.GetSession(spb.GetSessionRequest(user_id="alice", session_id=old))
    finally:
        assert proc.stop() == 0
    assert proc.logs("retention purge") == []


@pytest.mark.parametrize("days", ["-1", "nan", "inf", "soon"])
def test_a_bad_retention_is_refused_at_start(tmp_path: Path, days: str) -> None:
    with pytest.raises(RuntimeError, match="exited before listening") as refused:
        start_server(tmp_path, "--retention-days", days)
    assert "retention-days" in str(refused.value)


async def test_a_session_with_a_turn_in_progress_is_not_purged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "PASS_INTERVAL", 0.05)
    provider = GatedProvider()
    # Inactive after half a second: a turn held for longer would lose its session to a
    # purge that did not look for turns in progress.
    settings = terms_only(port=0, data_dir=tmp_path, retention_days=0.5 / DAY)
    async with in_process(settings, provider) as live:
        created = await live.stubs.sessions.CreateSession(spb.CreateSessionRequest(user_id="ann"))
        session_id = created.session.id
        await live.stubs.memories.AddMemory(mpb.AddMemoryRequest(user_id="ann", content="a fact"))
        provider.turn_gate.clear()
        call = live.stubs.chat.StreamChat(
            cpb.StreamChatRequest(
                session=pb.SessionContext(user_id="ann", session_id=session_id),
                user_message="a slow question",
            )
        )
        events = []
        async for event in call:
            events.append(event)
            if event.WhichOneof("event") == "text_delta":
                break
        await asyncio.sleep(1.5)  # three times the retention, many passes
        provider.turn_gate.set()
        events += [event async for event in call]
        assert events[-1].turn_completed.status == cpb.TURN_STATUS_OK
        listed = await live.stubs.sessions.ListMessages(
            spb.ListMessagesRequest(user_id="ann", session_id=session_id)
        )
        assert [m.message.content for m in listed.messages] == ["a slow question", "first second"]

        # Once the turn and its after-turn work are over, the session's inactivity counts.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            rows = await user_rows(live.db, "ann")
            if not rows["sessions"]:
                break
            await asyncio.sleep(0.1)
        assert rows["sessions"] == [] and rows["conversation"] == []
        assert rows["memories"] != []  # memories stay
        assert not (live.history / f"{session_id}.jsonl").exists()

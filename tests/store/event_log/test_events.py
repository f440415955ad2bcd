"""The event log on either engine: files (SQLite) or the event_lines table (PostgreSQL)
hold the same lines and answer reads the same way; on PostgreSQL appends to one session
keep their numbers and order under concurrency. And the event's own fields: timestamps,
token counts."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from contextd.store.engine.database import Database
from contextd.store.event_log.events import EventStore, NewEvent, event_tokens, format_ts
from contextd.store.open import Store
from contextd.store.sessions import SessionRepo

TS = 1715342400.0


@pytest.fixture
async def events(store: Store) -> AsyncIterator[EventStore]:
    log = store.event_log()
    yield log
    await log.aclose()


async def new_session(db: Database) -> str:
    """A stored session: on PostgreSQL a log's lines belong to their session's row."""
    return (await SessionRepo(db).create("alice")).id


async def read_all(log: EventStore, sid: str, after: int = 0, tenant: str = "default") -> list[Any]:
    return [e async for e in log.read(sid, after_line=after, tenant_id=tenant)]


async def stored_lines(db: Database, tmp_path: Path, sid: str) -> list[str]:
    """The session's lines as the engine keeps them."""
    if db.engine == "sqlite":
        # U+2028 is no line break: only newlines end lines.
        return (tmp_path / "history" / f"{sid}.jsonl").read_text("utf-8").split("\n")[:-1]
    rows = await db.reader.execute_fetchall(
        "SELECT data FROM event_lines WHERE session_id = ? ORDER BY line", (sid,)
    )
    return [str(row[0]) for row in rows]


async def test_lines_are_the_same_on_both_engines(
    events: EventStore, db: Database, tmp_path: Path
) -> None:
    sid = await new_session(db)
    await events.append(sid, "session_start", meta={"mode": "chat", "模型": "回声"}, ts=TS)
    await events.append(sid, "turn_start", turn=1, content="帮我\u2028读", ts=TS + 1)
    await events.append(sid, "final", turn=1, step=0, content="done", role="assistant", ts=TS + 2)
    head = f'{{"ts":"2024-05-10T12:00:0%d.000Z","session_id":"{sid}",'
    assert await stored_lines(db, tmp_path, sid) == [
        head % 0 + '"type":"session_start","meta":{"mode":"chat","模型":"回声"}}',
        head % 1 + '"turn":1,"type":"turn_start","content":"帮我\u2028读"}',
        head % 2 + '"turn":1,"step":0,"type":"final","content":"done","role":"assistant"}',
    ]
    read = await read_all(events, sid)
    assert [e["type"] for e in read] == ["session_start", "turn_start", "final"]
    assert [e["type"] for e in await read_all(events, sid, after=2)] == ["final"]
    assert await read_all(events, sid, after=3) == []


async def test_tenants_sessions_and_deletes_keep_apart(events: EventStore, db: Database) -> None:
    sid = await new_session(db)
    await events.append(sid, "session_start", ts=TS)
    await events.append(sid, "session_start", ts=TS, tenant_id="acme")
    await events.append(sid, "session_end", ts=TS, tenant_id="acme")
    assert len(await read_all(events, sid)) == 1
    assert len(await read_all(events, sid, tenant="acme")) == 2
    assert await read_all(events, uuid.uuid4().hex) == []
    assert await events.delete(sid, tenant_id="acme")
    assert not await events.delete(sid, tenant_id="acme")
    assert await read_all(events, sid, tenant="acme") == []
    assert len(await read_all(events, sid)) == 1
    # After a delete, a session's log starts again, as a new file would.
    await events.append(sid, "turn_start", turn=2, ts=TS, tenant_id="acme")
    assert [e["turn"] for e in await read_all(events, sid, tenant="acme")] == [2]


async def test_bad_arguments_are_refused(events: EventStore) -> None:
    with pytest.raises(ValueError, match="session_id"):
        await events.append("../etc", "session_start")
    with pytest.raises(ValueError, match="type"):
        await events.append(uuid.uuid4().hex, "nope")
    with pytest.raises(ValueError, match="after_line"):
        await read_all(events, uuid.uuid4().hex, after=-1)
    with pytest.raises(ValueError, match="tenant_id"):
        await events.append(uuid.uuid4().hex, "session_start", tenant_id="../x")


async def test_concurrent_appends_to_a_session_get_every_number_once(
    events: EventStore, db: Database
) -> None:
    sid = await new_session(db)
    await asyncio.gather(
        *(events.append(sid, "assistant", turn=1, step=i, ts=TS) for i in range(40))
    )
    read = await read_all(events, sid)
    assert sorted(e["step"] for e in read) == list(range(40))
    # Appends made one after another keep their order.
    for step in range(40, 50):
        await events.append(sid, "assistant", turn=1, step=step, ts=TS)
    assert [e["step"] for e in (await read_all(events, sid))[40:]] == list(range(40, 50))
    assert len(await read_all(events, sid, after=45)) == 5


async def test_a_closed_log_refuses_appends(events: EventStore) -> None:
    await events.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await events.append(uuid.uuid4().hex, "session_start")


async def test_a_deleted_sessions_lines_go_with_it(events: EventStore, db: Database) -> None:
    sid = await new_session(db)
    await events.append(sid, "session_start", ts=TS)
    assert await SessionRepo(db).delete(sid)
    if db.engine == "sqlite":
        return  # files: removed after the commit (store/event_log/removals.py)
    assert await read_all(events, sid) == []  # in the deleting transaction
    await events.append(sid, "turn_end", ts=TS)  # a turn that ran on: not written
    rows = await db.reader.execute_fetchall(
        "SELECT COUNT(*) FROM event_lines WHERE session_id = ?", (sid,)
    )
    assert rows[0][0] == 0


async def test_last_is_the_last_whole_event(
    events: EventStore, db: Database, tmp_path: Path
) -> None:
    sid = await new_session(db)
    assert await events.last(sid) is None
    await events.append(sid, "session_start", ts=TS)
    long = "x" * 20_000  # longer than the first piece a file's end is read in
    await events.append(sid, "turn_start", turn=1, content=long, ts=TS)
    last = await events.last(sid)
    assert last is not None and last["content"] == long
    await events.append(sid, "session_end", meta={"mode": "once"}, ts=TS)
    assert await events.last(sid) == (await read_all(events, sid))[-1]
    assert await events.last(sid, tenant_id="other") is None
    if db.engine == "sqlite":  # a torn last line (a crash mid-write) is no event
        path = tmp_path / "history" / f"{sid}.jsonl"
        path.write_bytes(path.read_bytes() + b'{"ts":"torn')
        last = await events.last(sid)
        assert last is not None and last["type"] == "session_end"


def test_timestamps_and_tokens() -> None:
    assert format_ts(1715342400.123) == "2024-05-10T12:00:00.123Z"
    assert format_ts(1715342400.0) == "2024-05-10T12:00:00.000Z"
    assert format_ts(1715342400.9996) == "2024-05-10T12:00:01.000Z"
    assert event_tokens(120, 35) == {"prompt": 120, "completion": 35, "total": 155}
    assert event_tokens(12, None) == {"prompt": 12}
    assert event_tokens(None, 28) == {"completion": 28}
    assert event_tokens(None, None) == {}
    assert event_tokens(0, 0) == {"prompt": 0, "completion": 0, "total": 0}


async def test_several_events_appended_at_once_follow_in_order(
    events: EventStore, db: Database, tmp_path: Path
) -> None:
    sid = await new_session(db)
    # On a new log, and after lines: numbered on from the log's end.
    for first in (True, False):
        written = await events.append_many(
            sid,
            [
                NewEvent("final", 1, 0, "done", "assistant", {"tokens": {"total": 3}}),
                NewEvent("turn_end", 1, meta={"status": "ok"}),
            ],
        )
        assert [e["type"] for e in written] == ["final", "turn_end"]
        if first:
            await events.append(sid, "turn_start", turn=2, content="again")
    read = await read_all(events, sid)
    assert [e["type"] for e in read] == ["final", "turn_end", "turn_start", "final", "turn_end"]
    assert read[3] == written[0] and read[4] == written[1]
    assert len(await stored_lines(db, tmp_path, sid)) == 5
    last = await events.last(sid)
    assert last is not None and last["type"] == "turn_end"
    with pytest.raises(ValueError, match="type must be one of"):
        await events.append_many(sid, [NewEvent("turn_end", 1), NewEvent("nope")])
    assert len(await read_all(events, sid)) == 5  # none of them

"""Workers writing one SQLite file take turns through a lock file (store/engine/write_lock.py):
a write waits for another worker's turn without holding up its event loop, starts when
that turn ends, gives up at the busy timeout, and a wait that gave up never keeps the
lock once it is granted late."""

from __future__ import annotations

import asyncio
import sqlite3
import stat
from pathlib import Path

import pytest
from contextd.store.engine.sqlite import WRITE_LOCK_SUFFIX, SqliteDatabase
from contextd.store.engine.write_lock import WriteLock, WriteLockTimeout


async def _bump(db: SqliteDatabase) -> None:
    async with db.transaction() as conn:
        await conn.execute("UPDATE cache_versions SET version = version + 1")


async def _held(db: SqliteDatabase, inside: asyncio.Event, leave: asyncio.Event) -> None:
    """A write transaction that stays open until ``leave`` is set."""
    async with db.transaction() as conn:
        await conn.execute("UPDATE cache_versions SET version = version + 1")
        inside.set()
        await leave.wait()


async def test_a_workers_write_waits_for_anothers_turn_and_starts_when_it_ends(
    tmp_path: Path,
) -> None:
    path = tmp_path / "contextd.sqlite3"
    first = await SqliteDatabase.open(path, shared=True)
    second = await SqliteDatabase.open(path, shared=True)
    try:
        lock_file = path.with_name(path.name + WRITE_LOCK_SUFFIX)
        assert stat.S_IMODE(lock_file.stat().st_mode) == 0o600
        inside, leave = asyncio.Event(), asyncio.Event()
        holding = asyncio.create_task(_held(first, inside, leave))
        await inside.wait()
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        ticker = asyncio.create_task(tick())
        waiting = asyncio.create_task(_bump(second))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        assert ticks >= 10  # the waiting worker's loop went on
        rows = await second.reader.execute_fetchall("SELECT version FROM cache_versions")
        assert rows  # and so do its reads
        leave.set()
        await asyncio.wait_for(asyncio.gather(holding, waiting), 5)
        ticker.cancel()
        rows = await first.reader.execute_fetchall("SELECT version FROM cache_versions")
        assert [r["version"] for r in rows] == [2]  # both writes committed, one after the other
    finally:
        await first.close()
        await second.close()


async def test_a_wait_gives_up_at_the_busy_timeout_and_its_late_grant_is_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "contextd.sqlite3"
    first = await SqliteDatabase.open(path, shared=True)
    monkeypatch.setattr("contextd.store.engine.sqlite.BUSY_TIMEOUT_MS", 100)
    second = await SqliteDatabase.open(path, shared=True)
    try:
        inside, leave = asyncio.Event(), asyncio.Event()
        holding = asyncio.create_task(_held(first, inside, leave))
        await inside.wait()
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            await _bump(second)
        leave.set()
        await holding
        # The given-up wait is granted now and must let go: both can write again.
        await asyncio.wait_for(_bump(first), 5)
        await asyncio.wait_for(_bump(second), 5)
        await asyncio.wait_for(_bump(first), 5)
    finally:
        await first.close()
        await second.close()


async def test_the_lock_is_one_holder_at_a_time_across_descriptors(tmp_path: Path) -> None:
    path = tmp_path / "writer"
    one, two, impatient = WriteLock(path, 5), WriteLock(path, 5), WriteLock(path, 0.05)
    try:
        await one.acquire()
        with pytest.raises(WriteLockTimeout, match="another worker held the write lock"):
            await impatient.acquire()
        waiting = asyncio.create_task(two.acquire())
        await asyncio.sleep(0.02)
        assert not waiting.done()
        one.release()
        await asyncio.wait_for(waiting, 5)
        late = asyncio.create_task(one.acquire())
        await asyncio.sleep(0.02)
        assert not late.done()  # the second holds it now
        two.release()
        await asyncio.wait_for(late, 5)
        one.release()
        # The impatient wait was granted in between and let go: it can take the lock.
        await impatient.acquire()
        impatient.release()
    finally:
        for lock in (one, two, impatient):
            lock.close()

"""SQLite's database: migrations applied once and recorded, a newer schema refused; under
concurrent writers and after a writer process is killed mid-write nothing acknowledged is
lost; cancelled writes roll back; reads never see an open transaction."""

from __future__ import annotations

import asyncio
import gc
import random
import signal
import sqlite3
import sys
from pathlib import Path

import pytest
from contextd.core.messages import ChatMessage, Role
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.sqlite import SqliteDatabase
from contextd.store.models import NewMessage
from contextd.store.sessions import SessionRepo

# The engine itself is under test (its file, WAL, locks, rollbacks, a killed writer):
# these tests open SqliteDatabase directly, without the parts store/open.py adds.
WRITERS = 100
MESSAGES_PER_WRITER = 20


async def test_migrations_are_recorded_and_idempotent_on_reopen(tmp_path: Path) -> None:
    path = tmp_path / "contextd.sqlite3"
    db = await SqliteDatabase.open(path)
    rows = list(await db.reader.execute_fetchall("SELECT * FROM schema_migrations"))
    first = [tuple(r) for r in rows]
    versions = [r[0] for r in first]
    assert versions == list(range(1, len(versions) + 1))
    assert (first[0][0], first[0][1]) == (1, "core")
    assert await db.schema_version() == len(versions)
    tables = {
        r[0]
        for r in await db.reader.execute_fetchall(
            "SELECT name FROM sqlite_schema WHERE type='table'"
        )
    }
    assert {
        "sessions",
        "conversation",
        "message_tokens",
        "compression_summaries",
        "session_summaries",
        "prompt_templates",
        "skills",
    } <= tables
    session = await SessionRepo(db).create("alice")
    await db.close()

    again = await SqliteDatabase.open(path)  # nothing re-applied, data kept
    try:
        rows = list(await again.reader.execute_fetchall("SELECT * FROM schema_migrations"))
        assert [tuple(r) for r in rows] == first
        assert await SessionRepo(again).get(session.id) == session
    finally:
        await again.close()


async def test_a_database_with_a_newer_schema_refuses_to_open(tmp_path: Path) -> None:
    path = tmp_path / "contextd.sqlite3"
    db = await SqliteDatabase.open(path)
    known = await db.schema_version()
    await db.close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'future', 0)",
            (known + 1,),
        )
    conn.close()
    with pytest.raises(RuntimeError, match=rf"schema version {known + 1}, newer than"):
        await SqliteDatabase.open(path)
    gc.collect()  # Database.open leaves its two connections to the collector on failure


async def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    """100 tasks, each appending 20 messages to its own session one call at a time, while
    readers read the rolling windows: every message is stored once, seqs are contiguous."""
    db = await SqliteDatabase.open(tmp_path / "contextd.sqlite3")
    try:
        sessions, conversation = SessionRepo(db), ConversationRepo(db)
        made = await asyncio.gather(*(sessions.create(f"user-{k % 7}") for k in range(WRITERS)))
        writing = True

        async def writer(k: int) -> list[int]:
            session = made[k]
            ids = []
            for i in range(MESSAGES_PER_WRITER):
                role = Role.USER if i % 2 == 0 else Role.ASSISTANT
                [stored] = await conversation.append(
                    session.id,
                    session.user_id,
                    [NewMessage(ChatMessage(role, f"w{k}-m{i}"), tokens={"est": i})],
                )
                ids.append(stored.id)
            return ids

        async def reader() -> int:
            reads = 0
            while writing:
                session = random.choice(made)
                window = await conversation.tail(session.id, 5, "est")
                seqs = [m.seq for m in window]
                if seqs:
                    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
                reads += 1
                # Statements run on the loop without suspending: let the writers in.
                await asyncio.sleep(0)
            return reads

        readers = [asyncio.create_task(reader()) for _ in range(4)]
        try:
            written = await asyncio.gather(*(writer(k) for k in range(WRITERS)))
        finally:
            writing = False
        assert sum(await asyncio.gather(*readers)) > 0

        all_ids = [i for ids in written for i in ids]
        assert len(set(all_ids)) == WRITERS * MESSAGES_PER_WRITER
        for k, session in enumerate(made):
            stored, token = await conversation.list_messages(session.id, 100)
            assert token == ""
            assert [m.seq for m in stored] == list(range(MESSAGES_PER_WRITER))
            assert [m.message.content for m in stored] == [
                f"w{k}-m{i}" for i in range(MESSAGES_PER_WRITER)
            ]
            assert [m.id for m in stored] == written[k]
            assert [m.tokens for m in stored] == [{"est": i} for i in range(MESSAGES_PER_WRITER)]
            after = await sessions.get(session.id)
            assert after is not None and after.message_count == MESSAGES_PER_WRITER
    finally:
        await db.close()


# The child: open the database, create a session, then append batches of 1-4 messages with
# token counts forever, printing each acknowledged (committed) message id, flushed at once.
CHILD = """
import asyncio, random, sys
from pathlib import Path

import pytest
from contextd.core.messages import ChatMessage, Role
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.sqlite import SqliteDatabase
from contextd.store.models import NewMessage
from contextd.store.sessions import SessionRepo

async def main() -> None:
    db = await SqliteDatabase.open(Path(sys.argv[1]))
    session = await SessionRepo(db).create("crash-user", title="crash")
    repo = ConversationRepo(db)
    rng = random.Random(int(sys.argv[2]))
    print("session", session.id, flush=True)
    n = 0
    while True:
        batch = []
        for _ in range(rng.randint(1, 4)):
            text = f"message {n} " + "lorem ipsum " * rng.randint(1, 200)
            role = Role.USER if n % 2 == 0 else Role.ASSISTANT
            batch.append(NewMessage(ChatMessage(role, text), tokens={"est": len(text) // 4}))
            n += 1
        for stored in await repo.append(session.id, "crash-user", batch):
            print(stored.id, flush=True)

asyncio.run(main())
"""


async def run_and_kill(path: Path, seed: int, acks_before_kill: int) -> tuple[str, list[int]]:
    """Run the child until it acknowledged ``acks_before_kill`` ids, SIGKILL it, return
    the session it wrote to and every id it acknowledged (including any still in the pipe)."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD,
        str(path),
        str(seed),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    acked: list[int] = []
    session_id = ""
    try:
        first = await asyncio.wait_for(child.stdout.readline(), 30)
        assert first.startswith(b"session "), first + await child.stderr.read()
        session_id = first.split()[1].decode()
        while len(acked) < acks_before_kill:
            line = await asyncio.wait_for(child.stdout.readline(), 30)
            assert line, await child.stderr.read()
            acked.append(int(line))
        await asyncio.sleep(random.uniform(0, 0.01))  # land anywhere in the next write
    finally:
        child.send_signal(signal.SIGKILL)
        rest, _ = await child.communicate()
    assert child.returncode == -signal.SIGKILL
    acked += [int(line) for line in rest.split()]
    return session_id, acked


async def test_acknowledged_messages_survive_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "contextd.sqlite3"
    rng = random.Random(20261122)
    written: dict[str, list[int]] = {}
    for round_ in range(4):
        session_id, acked = await run_and_kill(path, round_, rng.randint(30, 300))
        written[session_id] = acked
        wal = path.with_name(path.name + "-wal")
        assert wal.stat().st_size > 0  # the killed writer left a WAL for the reopen to recover

        db = await SqliteDatabase.open(path)  # recovers from the WAL the killed process left
        try:
            rows = list(await db.reader.execute_fetchall("PRAGMA integrity_check"))
            assert [tuple(r) for r in rows] == [("ok",)]
            rows = list(await db.reader.execute_fetchall("PRAGMA foreign_key_check"))
            assert rows == []
            conversation, sessions = ConversationRepo(db), SessionRepo(db)
            for sid, ids in written.items():
                stored, _ = await conversation.list_messages(sid, 1000)
                present = {m.id for m in stored}
                missing = [i for i in ids if i not in present]
                assert not missing, f"round {round_}: acknowledged ids lost: {missing[:10]}"
                # Whole batches or nothing: seqs contiguous, counts and tokens consistent.
                assert [m.seq for m in stored] == list(range(len(stored)))
                assert all(m.tokens == {"est": len(m.message.content) // 4} for m in stored)
                session = await sessions.get(sid)
                assert session is not None and session.message_count == len(stored)
        finally:
            await db.close()


async def test_a_cancelled_append_is_all_or_nothing(tmp_path: Path) -> None:
    """An append cancelled at any point (a client gone, a deadline) is stored whole or not
    at all, and the next write works."""
    db = await SqliteDatabase.open(tmp_path / "contextd.sqlite3")
    try:
        sessions, conversation = SessionRepo(db), ConversationRepo(db)
        session = await sessions.create("alice")
        batch = [
            NewMessage(ChatMessage(Role.USER, f"m{i}"), tokens={"est": 1}) for i in range(3000)
        ]
        for spins in (0, 1, 2, 5):
            before = await sessions.get(session.id)
            assert before is not None
            task = asyncio.create_task(conversation.append(session.id, "alice", batch))
            for _ in range(spins):
                await asyncio.sleep(0)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            after = await sessions.get(session.id)
            assert after is not None
            assert after.message_count in (before.message_count, before.message_count + 3000)
            await _assert_consistent(db, after.message_count)
            [more] = await conversation.append(session.id, "alice", [batch[0]])
            assert more.seq == after.message_count
    finally:
        await db.close()


async def test_a_transaction_cancelled_while_suspended_is_rolled_back(tmp_path: Path) -> None:
    """Cancelled while it waits on something else inside the transaction: nothing of it
    is kept, and the writer is usable at once."""
    db = await SqliteDatabase.open(tmp_path / "contextd.sqlite3")
    try:
        sessions, conversation = SessionRepo(db), ConversationRepo(db)
        session = await sessions.create("alice")
        inside = asyncio.Event()

        async def interrupted() -> None:
            async with db.transaction() as conn:
                await conn.execute(
                    "UPDATE sessions SET title = 'changed' WHERE id = ?", (session.id,)
                )
                inside.set()
                await asyncio.sleep(60)

        task = asyncio.create_task(interrupted())
        await inside.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        after = await sessions.get(session.id)
        assert after is not None and after.title == session.title
        [stored] = await conversation.append(
            session.id, "alice", [NewMessage(ChatMessage(Role.USER, "next"), tokens={"est": 1})]
        )
        assert stored.seq == 0
        await _assert_consistent(db, 1)
    finally:
        await db.close()


async def _assert_consistent(db: SqliteDatabase, count: int) -> None:
    rows = list(
        await db.reader.execute_fetchall(
            "SELECT COUNT(*), COALESCE(MAX(seq), -1) + 1,"
            " (SELECT COUNT(*) FROM message_tokens) FROM conversation"
        )
    )
    assert tuple(rows[0]) == (count,) * 3


async def test_a_write_cancelled_at_begin_leaves_the_writer_usable(tmp_path: Path) -> None:
    db = await SqliteDatabase.open(tmp_path / "contextd.sqlite3")
    try:
        sessions = SessionRepo(db)
        async with db.transaction():  # the next write waits for the lock, then is cancelled
            task = asyncio.create_task(sessions.create("alice"))
            await asyncio.sleep(0)
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert (await sessions.create("bob")).user_id == "bob"
    finally:
        await db.close()


async def test_reads_never_see_an_open_transaction(tmp_path: Path) -> None:
    """Reads share the writer's connection, except while a write transaction is open
    (its body suspended): then they see the last commit, not the write in progress."""
    db = await SqliteDatabase.open(tmp_path / "contextd.sqlite3")
    try:
        sessions = SessionRepo(db)
        session = await sessions.create("alice", title="before")
        written, release = asyncio.Event(), asyncio.Event()

        async def slow_write() -> None:
            async with db.transaction() as conn:
                await conn.execute(
                    "UPDATE sessions SET title = 'after' WHERE id = ?", (session.id,)
                )
                written.set()
                await release.wait()

        task = asyncio.create_task(slow_write())
        await written.wait()
        during = await sessions.get(session.id)
        assert during is not None and during.title == "before"
        release.set()
        await task
        after = await sessions.get(session.id)
        assert after is not None and after.title == "after"
    finally:
        await db.close()


async def test_a_worker_waits_for_anothers_write_lock_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers sharing the file: while another process holds the write lock, a write
    waits between tries on the event loop (other calls of the worker go on), starts once
    the lock is free, and gives up as SQLite's busy timeout would."""
    path = tmp_path / "contextd.sqlite3"
    db = await SqliteDatabase.open(path, shared=True)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another worker's write transaction
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        ticker = asyncio.create_task(tick())

        async def write() -> None:
            async with db.transaction() as conn:
                await conn.execute("UPDATE cache_versions SET version = version + 1")

        waiting = asyncio.create_task(write())
        await asyncio.sleep(0.15)
        assert not waiting.done()
        # The loop was free all along: SQLite's busy handler would have held it.
        assert ticks >= 20
        # A read of this worker goes on while its write waits.
        rows = await db.reader.execute_fetchall("SELECT count(*) AS n FROM cache_versions")
        assert rows[0]["n"] >= 1
        other.execute("COMMIT")
        await asyncio.wait_for(waiting, 2)
        ticker.cancel()

        monkeypatch.setattr("contextd.store.engine.sqlite.BUSY_TIMEOUT_MS", 100)
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            await write()
        other.execute("ROLLBACK")
        await write()  # the writer is usable after giving up
    finally:
        other.close()
        await db.close()

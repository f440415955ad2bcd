"""A build's session read (store/sessions.py): what it returns on both engines, and on
PostgreSQL that the session's kept messages, compression summary and the catalog answer a
build only at the version its one statement read, so that another server's writes are seen
at once while a session no one else wrote costs one statement."""

from __future__ import annotations

from pathlib import Path

import pytest
from contextd.core.messages import Role
from contextd.store.catalog import CatalogRepo
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.memory.repository import MemoryRepo
from contextd.store.models import Skill
from contextd.store.open import Store, open_store
from contextd.store.sessions import SessionRepo, SessionSnapshot, SessionSnapshots
from contextd.store.summaries import SummaryRepo

from tests.support.store_helpers import message


class Server:
    """One server's repositories (two of them on one database stand for two replicas)."""

    def __init__(self, db: Database) -> None:
        self.sessions = SessionRepo(db)
        self.conversation = ConversationRepo(db)
        self.summaries = SummaryRepo(db)
        self.catalog = CatalogRepo(db)
        self.snapshots = SessionSnapshots(db, self.sessions, self.conversation, self.summaries)

    async def snapshot(self, session_id: str) -> SessionSnapshot:
        snapshot = await self.snapshots.read(
            session_id, tokenizer="cl", window=4, user_id="alice", recent=3
        )
        assert snapshot is not None
        return snapshot

    async def build(self, session_id: str) -> tuple[list[str], str, list[str]]:
        """What a build reads: the newest messages, the compression summary, the skills."""
        snapshot = await self.snapshot(session_id)
        rows = await self.conversation.tail(session_id, 10, "cl", version=snapshot.version)
        active = await self.summaries.active_compression(session_id, version=snapshot.version)
        skills = await self.catalog.list_skills(version=snapshot.catalog_version)
        return (
            [r.message.content for r in rows],
            active.summary if active else "",
            [s.name for s in skills],
        )


def counting(db: Database) -> list[str]:
    statements: list[str] = []
    db.time_statements(lambda sql, _: statements.append(sql))
    return statements


async def test_the_snapshot_has_the_session_and_the_users_other_summaries(db: Database) -> None:
    server = Server(db)
    session = await server.sessions.create("alice", title="Budget")
    other = await server.sessions.create("alice", title="Trip")
    await server.summaries.upsert_session_summary(other.id, "alice", "a trip", by_host=True)
    await server.summaries.upsert_session_summary(session.id, "alice", "itself", by_host=True)
    snapshot = await server.snapshot(session.id)
    assert snapshot.session.title == "Budget"
    assert [(s.session_id, s.summary, s.title) for s in snapshot.recent] == [
        (other.id, "a trip", "Trip")
    ]
    assert (
        await server.snapshots.read("missing", tokenizer="cl", window=4, user_id="a", recent=3)
        is None
    )
    assert (
        await server.snapshots.read(
            session.id, tenant_id="other", tokenizer="cl", window=4, user_id="alice", recent=3
        )
        is None
    )


async def test_a_build_sees_another_servers_writes_and_reads_once_otherwise(
    db: Database,
) -> None:
    if not db.shared_between_processes:
        pytest.skip("SQLite has a single writer: its kept reads need no version")
    one, two = Server(db), Server(db)
    session = await one.sessions.create("alice")
    await one.conversation.append(session.id, "alice", [message(Role.USER, "first", cl=3)])
    assert await two.build(session.id) == (["first"], "", [])
    statements = counting(db)
    assert await two.build(session.id) == (["first"], "", [])
    assert len(statements) == 1, statements  # the snapshot; the rest was kept
    # Another server writes: the next build reads it in the same one statement.
    [row] = await one.conversation.append(session.id, "alice", [message(Role.ASSISTANT, "2nd")])
    statements.clear()
    assert await two.build(session.id) == (["first", "2nd"], "", [])
    assert len(statements) == 1, statements
    await one.summaries.add_compression(session.id, [row.id], row.id, "folded")
    assert await two.build(session.id) == (["first", "2nd"], "folded", [])
    await one.catalog.upsert_skill(Skill("k", "d", "p", ()))
    assert await two.build(session.id) == (["first", "2nd"], "folded", ["k"])
    # Its own writes keep its kept rows current without a read.
    await two.conversation.append(session.id, "alice", [message(Role.USER, "third", cl=2)])
    statements.clear()
    assert await two.build(session.id) == (["first", "2nd", "third"], "folded", ["k"])
    assert len(statements) == 1, statements
    # A changed message (collected) is seen too.
    await one.conversation.set_collected(row.id, True)
    snapshot = await two.snapshot(session.id)
    rows = await two.conversation.tail(session.id, 10, "cl", version=snapshot.version)
    assert [r.is_collected for r in rows] == [False, True, False]


async def test_reads_without_a_version_go_to_the_database_on_postgresql(db: Database) -> None:
    if not db.shared_between_processes:
        pytest.skip("SQLite has a single writer: its kept reads need no version")
    one, two = Server(db), Server(db)
    session = await one.sessions.create("alice")
    await two.build(session.id)
    await one.conversation.append(session.id, "alice", [message(Role.USER, "new")])
    # Kept rows of an older version are not handed to a read that names none.
    assert [r.message.content for r in await two.conversation.tail(session.id, 5, "cl")] == ["new"]


async def test_the_snapshot_says_whether_the_user_has_memories_and_a_search_then_reads_none(
    db: Database, store: Store
) -> None:
    if not db.shared_between_processes:
        # Where this process is the only writer the memory layer knows it itself.
        server = Server(db)
        session = await server.sessions.create("alice")
        assert (await server.snapshot(session.id)).memories_stored is None
        return
    await _snapshot_says_whether_memories_are_stored(db, store, MemoryRepo(db, store.memory_index))


async def test_workers_sharing_an_sqlite_file_read_whether_the_user_has_memories(
    tmp_path: Path,
) -> None:
    """Without it every turn of a user with no memory would search by meaning (embed the
    question) in each worker, which cannot remember that the user has none."""
    first = await open_store("", tmp_path, shared=True)
    second = await open_store("", tmp_path, shared=True)
    try:
        other = MemoryRepo(second.db, second.memory_index)
        await _snapshot_says_whether_memories_are_stored(first.db, first, other)
    finally:
        await first.close()
        await second.close()


async def _snapshot_says_whether_memories_are_stored(
    db: Database, store: Store, other: MemoryRepo
) -> None:
    server = Server(db)
    session = await server.sessions.create("alice")
    memories = MemoryRepo(db, store.memory_index)
    assert (await server.snapshot(session.id)).memories_stored is False
    statements = counting(db)
    found = await memories.search_noted("alice", "old maps", 3, stored=False)
    assert (found.found, statements) == ([], [])
    # Another server gives the user a memory: the next snapshot says so.
    await other.add("alice", "I collect old maps")
    snapshot = await server.snapshot(session.id)
    assert snapshot.memories_stored is True
    found = await memories.search_noted("alice", "old maps", 3, stored=snapshot.memories_stored)
    assert [m.memory.content for m in found.found] == ["I collect old maps"]


async def test_workers_sharing_an_sqlite_file_see_each_others_writes(tmp_path: Path) -> None:
    """Two workers' databases on one SQLite file (--workers): kept reads answer a build
    only at the versions it read, so the other worker's writes are seen at once, and a
    session no one else wrote is read from memory (the session and the recent summaries
    only)."""
    first = await open_store("", tmp_path, shared=True)
    second = await open_store("", tmp_path, shared=True)
    try:
        one, two = Server(first.db), Server(second.db)
        session = await one.sessions.create("alice")
        await one.conversation.append(session.id, "alice", [message(Role.USER, "first", cl=3)])
        assert await two.build(session.id) == (["first"], "", [])
        statements = counting(second.db)
        assert await two.build(session.id) == (["first"], "", [])
        assert len(statements) == 2, statements
        [row] = await one.conversation.append(session.id, "alice", [message(Role.ASSISTANT, "2nd")])
        assert await two.build(session.id) == (["first", "2nd"], "", [])
        await one.summaries.add_compression(session.id, [row.id], row.id, "folded")
        assert await two.build(session.id) == (["first", "2nd"], "folded", [])
        await one.catalog.upsert_skill(Skill("k", "d", "p", ()))
        assert await two.build(session.id) == (["first", "2nd"], "folded", ["k"])
        await two.conversation.append(session.id, "alice", [message(Role.USER, "third", cl=2)])
        statements.clear()
        assert await two.build(session.id) == (["first", "2nd", "third"], "folded", ["k"])
        assert len(statements) == 2, statements
        await one.conversation.set_collected(row.id, True)
        snapshot = await two.snapshot(session.id)
        rows = await two.conversation.tail(session.id, 10, "cl", version=snapshot.version)
        assert [r.is_collected for r in rows] == [False, True, False]
    finally:
        await first.close()
        await second.close()

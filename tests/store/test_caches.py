"""What every repository's kept reads promise together: the rows they hand out cannot be
changed, a write that failed leaves every cache as it was, and where another process may
write the database (PostgreSQL) a read that names no version its call read is never served
from memory (tests/store/test_session_snapshot.py has the reads that do)."""

from __future__ import annotations

import dataclasses
import sqlite3

import pytest
from contextd.core.errors import SessionNotFound
from contextd.core.messages import Role
from contextd.store.catalog import CatalogRepo
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.memory.repository import MemoryRepo
from contextd.store.models import Skill
from contextd.store.open import Store
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo

from tests.support.store_helpers import assert_tail_matches_disk, message, no_statements


async def refuse_inserts_into(db: Database, table: str) -> None:
    """Make every later INSERT into ``table`` fail inside its transaction."""
    async with db.transaction() as conn:
        await conn.execute(
            f"CREATE TRIGGER refuse_{table} BEFORE INSERT ON {table}"
            " BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )


async def test_rows_handed_out_by_the_caches_cannot_be_changed(db: Database) -> None:
    sessions, repo = SessionRepo(db), ConversationRepo(db)
    summaries, catalog = SummaryRepo(db), CatalogRepo(db)
    session = await sessions.create("alice")
    await repo.append(session.id, "alice", [message(Role.USER, "q", cl=1)])
    [row] = await repo.tail(session.id, 5, "cl")
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.tokens = {"cl": 99}  # type: ignore[misc]
    with pytest.raises(TypeError):
        row.tokens["cl"] = 99  # type: ignore[index]
    await summaries.add_compression(session.id, [row.id], row.id, "s")
    await summaries.upsert_session_summary(session.id, "alice", "a talk", by_host=True)
    await catalog.upsert_template("s", "v1")
    await catalog.upsert_skill(Skill("k", "d", "p", ("excel",)))
    active = await summaries.active_compression(session.id)
    [recent] = await summaries.recent_session_summaries("alice")
    template = await catalog.get_template("s")
    [skill] = await catalog.list_skills("excel")
    assert active is not None and template is not None
    for shared, name, value in (
        (active, "message_ids", [7]),
        (recent, "summary", "changed"),
        (template, "system_prompt", "changed"),
        (skill, "apps", ["word"]),
    ):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(shared, name, value)
    assert isinstance(active.message_ids, tuple) and isinstance(skill.apps, tuple)
    assert [r.tokens for r in await repo.tail(session.id, 5, "cl")] == [{"cl": 1}]


@pytest.mark.sqlite_only
async def test_failed_writes_leave_every_cache_as_it_was(
    db: Database, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions, repo = SessionRepo(db), ConversationRepo(db)
    summaries, catalog = SummaryRepo(db), CatalogRepo(db)
    memories = MemoryRepo(db, store.memory_index)
    session = await sessions.create("alice")
    other = await sessions.create("alice", title="Other")
    [first] = await repo.append(session.id, "alice", [message(Role.USER, "q", cl=1)])
    await summaries.add_compression(session.id, [first.id], first.id, "kept")
    await summaries.upsert_session_summary(other.id, "alice", "other talk", by_host=True)
    await catalog.upsert_skill(Skill("k", "d", "p", ("excel",)))
    tail = await repo.tail(session.id, 5, "cl")
    active = await summaries.active_compression(session.id)
    recent = await summaries.recent_session_summaries("alice", session.id)
    skills = await catalog.list_skills("excel")
    assert await memories.search("alice", "coffee") == []

    with pytest.raises(SessionNotFound):
        await repo.append(session.id, "mallory", [message(Role.USER, "not hers")])
    with pytest.raises(SessionNotFound):
        await summaries.upsert_session_summary(other.id, "mallory", "not hers", by_host=True)
    with pytest.raises(ValueError):
        await memories.add("alice", "   ")
    await refuse_inserts_into(db, "compression_summaries")
    with pytest.raises(sqlite3.IntegrityError):  # after it made the earlier one inactive
        await summaries.add_compression(session.id, [first.id], first.id, "lost")
    await refuse_inserts_into(db, "skills")
    with pytest.raises(sqlite3.IntegrityError):
        await catalog.upsert_skill(Skill("k2", "d", "p", ("excel",)))

    with no_statements(monkeypatch):
        assert await repo.tail(session.id, 5, "cl") == tail
        assert await summaries.active_compression(session.id) is active
        assert await summaries.recent_session_summaries("alice", session.id) == recent
        assert await catalog.list_skills("excel") == skills
        assert await memories.search("alice", "coffee") == []
    # ... and what they kept is what the database holds.
    await assert_tail_matches_disk(db, repo, session.id)
    assert active == await SummaryRepo(db).active_compression(session.id)
    assert skills == await CatalogRepo(db).list_skills("excel")


async def test_on_postgresql_every_read_sees_another_servers_writes(
    db: Database, store: Store
) -> None:
    """Two sets of repositories on one database stand for two servers: nothing one of
    them read before is served again once the other wrote."""
    if not db.shared_between_processes:
        pytest.skip("SQLite has a single writer, which its caches rely on")
    one, two = SessionRepo(db), ConversationRepo(db)
    other = ConversationRepo(db)
    session = await one.create("alice")
    await two.append(session.id, "alice", [message(Role.USER, "first")])
    assert [m.message.content for m in await other.tail(session.id, 10, "cl")] == ["first"]
    await two.append(session.id, "alice", [message(Role.ASSISTANT, "second")])
    assert [m.message.content for m in await other.tail(session.id, 10, "cl")] == [
        "first",
        "second",
    ]
    catalog, other_catalog = CatalogRepo(db), CatalogRepo(db)
    assert await other_catalog.get_template("s") is None
    await catalog.upsert_template("s", "prompt")
    template = await other_catalog.get_template("s")
    assert template is not None and template.system_prompt == "prompt"
    assert await other_catalog.list_skills() == []
    await catalog.upsert_skill(Skill("k", "d", "p", (), True, 0.0))
    assert [s.name for s in await other_catalog.list_skills()] == ["k"]
    summaries, other_summaries = SummaryRepo(db), SummaryRepo(db)
    assert await other_summaries.active_compression(session.id) is None
    await summaries.add_compression(session.id, [1], 1, "folded")
    active = await other_summaries.active_compression(session.id)
    assert active is not None and active.summary == "folded"
    memories = MemoryRepo(db, store.memory_index)
    other_memories = MemoryRepo(db, store.memory_index)
    assert await other_memories.search("alice", "coffee") == []
    await memories.add("alice", "Alice drinks coffee")
    assert len(await other_memories.search("alice", "coffee")) == 1

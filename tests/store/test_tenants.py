"""Tenants in the store: migration 0007 keeps every row (in the default tenant), and every
read and write of a user's rows names the tenant, so the same user id in two tenants is two
users who never see each other's sessions, messages, summaries, memories or history."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from contextd.core.errors import SessionNotFound
from contextd.core.messages import ChatMessage, Role
from contextd.store.catalog import CatalogRepo
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.engine.migrations import SQLITE_MIGRATIONS, migration_files
from contextd.store.engine.sqlite import SqliteDatabase, _statements
from contextd.store.event_log.files import EventLog
from contextd.store.memory.history import MemoryHistoryRepo
from contextd.store.memory.repository import MemoryRepo
from contextd.store.models import NewMessage, Skill
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo

A, B = "acme", "globex"


def user(text: str) -> NewMessage:
    return NewMessage(ChatMessage(Role.USER, text))


# --- the migration ----------------------------------------------------------------------------


def _database_of_version(path: Path, version: int) -> sqlite3.Connection:
    """A database made by the migrations up to ``version``, as that contextd left it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "CREATE TABLE schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    for number, name, sql in migration_files(SQLITE_MIGRATIONS)[:version]:
        for statement in _statements(sql):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (number, name, time.time()))
    return conn


def _fill_version_6(conn: sqlite3.Connection) -> None:
    now = time.time()
    conn.execute(
        "INSERT INTO sessions (id, user_id, scenario, title, created_at, updated_at)"
        " VALUES (?, 'alice', 'excel', 'Budget', ?, ?)",
        ("a" * 32, now - 10, now - 10),
    )
    conn.execute(
        "INSERT INTO conversation (session_id, user_id, seq, role, content, created_at,"
        " updated_at) VALUES (?, 'alice', 0, 'user', 'hello', ?, ?)",
        ("a" * 32, now, now),
    )
    conn.execute(
        "INSERT INTO session_summaries (session_id, user_id, summary, updated_at)"
        " VALUES (?, 'alice', 'a budget talk', ?)",
        ("a" * 32, now),
    )
    for mid, text in ((1, "I drink coffee"), (2, "I live in Lyon"), (5, "I like tea")):
        conn.execute(
            "INSERT INTO memories (id, user_id, content, content_hash, created_at, updated_at)"
            " VALUES (?, 'alice', ?, ?, ?, ?)",
            (mid, text, f"{mid:032x}", now - mid, now - mid),
        )
    conn.execute("DELETE FROM memories WHERE id = 5")  # the high-water mark stays 5
    conn.execute(
        "INSERT INTO memory_history (memory_id, user_id, action, new_content, method,"
        " changed_at) VALUES (1, 'alice', 'add', 'I drink coffee', 'rule-fallback', ?)",
        (now,),
    )
    conn.execute(
        "INSERT INTO prompt_templates (scenario, system_prompt, updated_at)"
        " VALUES ('excel', 'You help with spreadsheets.', ?)",
        (now,),
    )
    conn.execute(
        "INSERT INTO skills (name, prompt, apps, updated_at) VALUES ('charts', 'Make charts.',"
        " '[\"excel\"]', ?)",
        (now,),
    )


async def test_migration_keeps_every_row_in_the_default_tenant(tmp_path: Path) -> None:
    path = tmp_path / "contextd.sqlite3"
    old = _database_of_version(path, 6)
    # The memories index as version 6 built it, so that search works without a rebuild.
    from contextd.store.memory.fts5_index import fts_terms

    _fill_version_6(old)
    for mid, text in old.execute("SELECT id, content FROM memories").fetchall():
        old.execute(
            "INSERT INTO memories_fts (rowid, terms) VALUES (?, ?)", (mid, fts_terms("alice", text))
        )
    old.close()

    db = await SqliteDatabase.open(path)
    try:
        assert await db.schema_version() == len(migration_files(SQLITE_MIGRATIONS))
        sessions, conversation = SessionRepo(db), ConversationRepo(db)
        summaries, memories = SummaryRepo(db), MemoryRepo(db)
        listed, _ = await sessions.list_sessions("alice")
        assert [(s.id, s.title, s.tenant_id, s.message_count) for s in listed] == [
            ("a" * 32, "Budget", "default", 1)
        ]
        messages, _ = await conversation.list_messages("a" * 32)
        assert [m.message.content for m in messages] == ["hello"]
        assert (await conversation.get(messages[0].id)) is not None
        recent = await summaries.recent_session_summaries("alice")
        assert [s.summary for s in recent] == ["a budget talk"]
        kept, _ = await memories.list_memories("alice")
        assert [(m.id, m.content, m.tenant_id) for m in kept] == [
            (1, "I drink coffee", "default"),
            (2, "I live in Lyon", "default"),
        ]
        found = await memories.search("alice", "coffee")
        assert [m.memory.id for m in found] == [1]
        history = await MemoryHistoryRepo(db, memories).for_user("alice")
        assert [h.new_content for h in history] == ["I drink coffee"]
        catalog = CatalogRepo(db)
        template = await catalog.get_template("excel")
        assert template is not None and template.system_prompt == "You help with spreadsheets."
        assert [s.name for s in await catalog.list_skills("excel")] == ["charts"]
        # An id deleted before the migration is never given again.
        added, created = await memories.add("alice", "I play chess")
        assert created and added.id == 6
        # Deleting a memory still forgets its history (the trigger was made again).
        assert await memories.delete(1)
        assert await MemoryHistoryRepo(db, memories).for_user("alice") == []
    finally:
        await db.close()


@pytest.mark.sqlite_only
async def test_migrated_indexes_lead_with_tenant_and_user(db: Database) -> None:
    rows = await db.reader.execute_fetchall(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
    )
    indexes = {name: sql for name, sql in rows}
    for name in (
        "sessions_tenant_user_updated",
        "session_summaries_tenant_user_updated",
        "memory_history_tenant_user",
        "memories_tenant_user_created",
    ):
        assert "(tenant_id, user_id" in indexes[name]
    assert not any(name.endswith("_user_updated") and "tenant" not in name for name in indexes)
    plan = await db.reader.execute_fetchall(
        "EXPLAIN QUERY PLAN SELECT id FROM sessions WHERE tenant_id = ? AND user_id = ?"
        " ORDER BY updated_at DESC, id DESC LIMIT 5",
        ("t", "u"),
    )
    assert "sessions_tenant_user_updated" in str([tuple(r) for r in plan])


# --- scoped reads and writes -------------------------------------------------------------------


async def test_sessions_and_messages_stay_in_their_tenant(db: Database) -> None:
    sessions, conversation = SessionRepo(db), ConversationRepo(db)
    mine = await sessions.create("bob", title="A's", tenant_id=A)
    theirs = await sessions.create("bob", title="B's", tenant_id=B)
    assert mine.tenant_id == A and theirs.tenant_id == B
    assert await sessions.get(mine.id, tenant_id=B) is None
    assert await sessions.get(mine.id) is None  # nor in the default tenant
    got = await sessions.get(mine.id, tenant_id=A)
    assert got is not None and got.title == "A's"
    assert [s.title for s in (await sessions.list_sessions("bob", tenant_id=A))[0]] == ["A's"]
    assert [s.title for s in (await sessions.list_sessions("bob", tenant_id=B))[0]] == ["B's"]
    assert (await sessions.list_sessions("bob"))[0] == []

    [stored] = await conversation.append(mine.id, "bob", [user("in A")], tenant_id=A)
    # Bob of tenant B cannot write into A's session, whatever he knows of its id.
    with pytest.raises(SessionNotFound):
        await conversation.append(mine.id, "bob", [user("from B")], tenant_id=B)
    with pytest.raises(SessionNotFound):
        await conversation.append(mine.id, "bob", [user("default")])
    assert await conversation.get(stored.id, tenant_id=B) is None
    found = await conversation.get(stored.id, tenant_id=A)
    assert found is not None and found.message.content == "in A"

    # The newest rows are kept per (tenant, session): another tenant's read of the same
    # id finds neither kept rows nor stored ones, and keeps nothing.
    assert [m.message.content for m in await conversation.tail(mine.id, 5, "cl", tenant_id=A)] == [
        "in A"
    ]
    assert await conversation.tail(mine.id, 5, "cl", tenant_id=B) == []
    assert await conversation.first(mine.id, tenant_id=B) is None
    assert (await conversation.list_messages(mine.id, tenant_id=B))[0] == []
    assert await conversation.set_collected(stored.id, True, tenant_id=B) is None
    assert not await sessions.delete(mine.id, tenant_id=B)
    assert await sessions.get(mine.id, tenant_id=A) is not None
    assert await sessions.delete(mine.id, tenant_id=A)
    assert await conversation.tail(mine.id, 5, "cl", tenant_id=A) == []


async def test_session_summaries_stay_in_their_tenant(db: Database) -> None:
    sessions, summaries = SessionRepo(db), SummaryRepo(db)
    mine = await sessions.create("bob", tenant_id=A)
    theirs = await sessions.create("bob", tenant_id=B)
    assert await summaries.upsert_session_summary(mine.id, "bob", "A talk", True, tenant_id=A)
    with pytest.raises(SessionNotFound):
        await summaries.upsert_session_summary(mine.id, "bob", "B's words", True, tenant_id=B)
    assert await summaries.recent_session_summaries("bob", theirs.id, tenant_id=B) == []
    recent = await summaries.recent_session_summaries("bob", theirs.id, tenant_id=A)
    assert [s.summary for s in recent] == ["A talk"]
    assert await summaries.recent_session_summaries("bob", tenant_id=B) == []


async def test_memories_and_their_search_stay_in_their_tenant(db: Database) -> None:
    memories = MemoryRepo(db)
    a_mem, _ = await memories.add("bob", "I drink coffee every morning", tenant_id=A)
    # The same text for bob of B is B's own memory, not a duplicate of A's.
    b_mem, created = await memories.add("bob", "I drink coffee every morning", tenant_id=B)
    assert created and b_mem.id != a_mem.id and b_mem.tenant_id == B
    await memories.add("bob", "我住在上海", tenant_id=A)
    assert [m.memory.id for m in await memories.search("bob", "coffee", tenant_id=A)] == [a_mem.id]
    assert [m.memory.id for m in await memories.search("bob", "coffee", tenant_id=B)] == [b_mem.id]
    assert await memories.search("bob", "上海", tenant_id=B) == []
    assert await memories.search("bob", "coffee") == []
    assert await memories.get(a_mem.id, tenant_id=B) is None
    assert await memories.count("bob", tenant_id=A) == 2
    assert await memories.count("bob", tenant_id=B) == 1
    listed, _ = await memories.list_memories("bob", tenant_id=B)
    assert [m.id for m in listed] == [b_mem.id]
    added = await memories.add_many("bob", ["tea", "I drink coffee every morning"], tenant_id=B)
    assert added == 1
    assert await memories.count("bob", tenant_id=A) == 2
    # Deleting B's memory leaves A's and A's index entries.
    assert await memories.delete(b_mem.id)
    assert [m.memory.id for m in await memories.search("bob", "coffee", tenant_id=A)] == [a_mem.id]
    assert await memories.reindex() == 3
    assert [m.memory.id for m in await memories.search("bob", "coffee", tenant_id=A)] == [a_mem.id]
    assert await memories.search("bob", "coffee", tenant_id=B) == []


async def test_memory_rewrites_and_history_stay_in_their_tenant(db: Database) -> None:
    memories = MemoryRepo(db)
    history = MemoryHistoryRepo(db, memories)
    a_mem, _ = await memories.add("bob", "I live in Lyon", tenant_id=A)
    await history.record_add(a_mem, "rule-fallback")
    # Bob of B cannot rewrite A's memory through its id.
    assert (
        await history.replace(
            a_mem.id, "bob", "I live in Lyon", "I live in Paris", "m", tenant_id=B
        )
        is None
    )
    done = await history.replace(
        a_mem.id, "bob", "I live in Lyon", "I live in Paris", "m", tenant_id=A
    )
    assert done is not None and done.memory.content == "I live in Paris"
    assert [h.action for h in await history.for_user("bob", tenant_id=A)] == ["update", "add"]
    assert await history.for_user("bob", tenant_id=B) == []
    assert [m.memory.id for m in await memories.search("bob", "Paris", tenant_id=A)] == [a_mem.id]


async def test_templates_and_skills_are_overridden_per_tenant(db: Database) -> None:
    catalog = CatalogRepo(db)
    await catalog.upsert_template("excel", "server-wide")
    await catalog.upsert_skill(Skill("charts", prompt="default charts"))
    await catalog.upsert_skill(Skill("tables", prompt="default tables"))
    # A tenant without overrides reads the defaults.
    template = await catalog.get_template("excel", tenant_id=A)
    assert template is not None and template.system_prompt == "server-wide"
    # An override is read by its tenant only.
    await catalog.upsert_template("excel", "acme's", tenant_id=A)
    await catalog.upsert_skill(Skill("charts", prompt="acme charts"), tenant_id=A)
    await catalog.upsert_skill(Skill("tables", prompt="off", enabled=False), tenant_id=A)
    await catalog.upsert_skill(Skill("acme-only", prompt="acme's own"), tenant_id=A)
    template = await catalog.get_template("excel", tenant_id=A)
    assert template is not None and template.system_prompt == "acme's"
    template = await catalog.get_template("excel", tenant_id=B)
    assert template is not None and template.system_prompt == "server-wide"
    template = await catalog.get_template("excel")
    assert template is not None and template.system_prompt == "server-wide"
    assert [t.system_prompt for t in await catalog.list_templates(tenant_id=A)] == ["acme's"]
    assert [t.system_prompt for t in await catalog.list_templates(tenant_id=B)] == ["server-wide"]
    assert [(s.name, s.prompt) for s in await catalog.list_skills(tenant_id=A)] == [
        ("acme-only", "acme's own"),
        ("charts", "acme charts"),
        ("tables", "off"),
    ]
    assert [s.name for s in await catalog.list_skills(enabled_only=True, tenant_id=A)] == [
        "acme-only",
        "charts",
    ]
    assert [(s.name, s.prompt) for s in await catalog.list_skills(tenant_id=B)] == [
        ("charts", "default charts"),
        ("tables", "default tables"),
    ]
    # A tenant deletes only its own rows: never a default, never another tenant's.
    assert not await catalog.delete_template("excel", tenant_id=B)
    assert not await catalog.delete_skill("acme-only", tenant_id=B)
    assert await catalog.delete_template("excel", tenant_id=A)
    template = await catalog.get_template("excel", tenant_id=A)
    assert template is not None and template.system_prompt == "server-wide"
    assert await catalog.delete_skill("charts", tenant_id=A)
    assert [(s.name, s.prompt) for s in await catalog.list_skills("excel", tenant_id=A)][1] == (
        "charts",
        "default charts",
    )
    assert not await catalog.delete_template("excel", tenant_id=A)


async def test_event_logs_of_other_tenants_live_in_a_tenant_directory(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "history")
    sid = "b" * 32
    await log.append(sid, "session_start")
    await log.append(sid, "session_start", tenant_id=A)
    await log.append(sid, "turn_start", turn=1, tenant_id=A)
    assert (tmp_path / "history" / f"{sid}.jsonl").is_file()  # the default tenant: as before
    assert (tmp_path / "history" / "tenants" / A / f"{sid}.jsonl").is_file()
    assert [e["type"] async for e in log.read(sid)] == ["session_start"]
    assert [e["type"] async for e in log.read(sid, tenant_id=A)] == ["session_start", "turn_start"]
    assert [e async for e in log.read(sid, tenant_id=B)] == []
    assert await log.delete(sid, tenant_id=A)
    assert [e["type"] async for e in log.read(sid)] == ["session_start"]


@pytest.mark.parametrize("tenant", ["..", "../x", "a/b", ".hidden", "", "x" * 129, "a b", "é"])
async def test_event_log_refuses_a_tenant_id_that_is_not_a_plain_name(
    tmp_path: Path, tenant: str
) -> None:
    log = EventLog(tmp_path / "history")
    with pytest.raises(ValueError, match="tenant_id"):
        await log.append("c" * 32, "session_start", tenant_id=tenant)
    with pytest.raises(ValueError, match="tenant_id"):
        log.path("c" * 32, tenant)
    assert _names_under(tmp_path) == ["history"]


def _names_under(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*"))

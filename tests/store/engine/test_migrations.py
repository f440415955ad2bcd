"""The two engines' migration trees: numbered 1..n each, the index of which SQLite migrations
each PostgreSQL one corresponds to covering both trees in order; and SQLite's migration to
tenants, which keeps every row in the default tenant."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from contextd.store.catalog import CatalogRepo
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.engine.migrations import (
    POSTGRESQL_MIGRATIONS,
    SQLITE_MIGRATIONS,
    SQLITE_OF_POSTGRESQL,
    migration_files,
)
from contextd.store.engine.sqlite import DB_FILENAME, _statements
from contextd.store.memory.history import MemoryHistoryRepo
from contextd.store.memory.repository import MemoryRepo
from contextd.store.open import open_store
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo


def test_every_migration_has_its_counterpart_in_order() -> None:
    sqlite = {version: name for version, name, _ in migration_files(SQLITE_MIGRATIONS)}
    postgresql = migration_files(POSTGRESQL_MIGRATIONS)
    assert sorted(SQLITE_OF_POSTGRESQL) == [version for version, _, _ in postgresql]
    # Every SQLite migration once, in the order of PostgreSQL's.
    covered = [v for version in sorted(SQLITE_OF_POSTGRESQL) for v in SQLITE_OF_POSTGRESQL[version]]
    assert covered == sorted(sqlite)
    for version, name, sql in postgresql:
        counterparts = SQLITE_OF_POSTGRESQL[version]
        header = sql.splitlines()[0]
        assert header.startswith(f"-- {version:04d}_{name}:"), header
        if len(counterparts) == 1:  # one change in each tree: the same name, and said so
            (counterpart,) = counterparts
            assert sqlite[counterpart] == name, (version, counterpart)
            assert f"SQLite's {counterpart:04d}" in header, header
        elif counterparts:
            assert f"{counterparts[0]:04d} to {counterparts[-1]:04d}" in header, header


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
    old = _database_of_version(tmp_path / DB_FILENAME, 6)
    # The memories index as version 6 built it, so that search works without a rebuild.
    from contextd.store.memory.fts5_index import fts_terms

    _fill_version_6(old)
    for mid, text in old.execute("SELECT id, content FROM memories").fetchall():
        old.execute(
            "INSERT INTO memories_fts (rowid, terms) VALUES (?, ?)", (mid, fts_terms("alice", text))
        )
    old.close()

    store = await open_store("", tmp_path)  # as the server opens it
    db = store.db
    try:
        assert await db.schema_version() == len(migration_files(SQLITE_MIGRATIONS))
        sessions, conversation = SessionRepo(db), ConversationRepo(db)
        summaries, memories = SummaryRepo(db), MemoryRepo(db, store.memory_index)
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
        await store.close()


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

"""Migration 0014 (SQLite) / 0009 (PostgreSQL) on a database the previous migrations made,
with memories and their history in it: nothing is lost. Every memory keeps its id, text
and vector; each text a memory had before an update comes back as a superseded memory,
true from the memory's previous change to that update; a memory merged into another
comes back under its own id, superseded by that one; the history rows name them; and
searches find the old facts as of their time only."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from contextd.store.engine.migrations import (
    POSTGRESQL_MIGRATIONS,
    SQLITE_MIGRATIONS,
    migration_files,
)
from contextd.store.engine.sqlite import DB_FILENAME
from contextd.store.memory.filters import MemoryFilter
from contextd.store.memory.history import MemoryHistoryRepo
from contextd.store.memory.index import keyed_terms
from contextd.store.memory.repository import MemoryRepo
from contextd.store.memory.versions import MemoryDetails
from contextd.store.open import Store, open_store

from tests.store.engine.test_migrations import _database_of_version
from tests.support.postgres import PostgresServer

T0, T1, T2, T3 = 1_700_000_000.0, 1_700_100_000.0, 1_700_200_000.0, 1_700_300_000.0
SESSION = "s" * 32
VECTOR = b"\x00\x00\x80\x3f" * 4  # four float32 ones

# The memories and history rows of the previous schema, as contextd wrote them: memory 1
# said "I live in Lisbon" (added after a turn), then "I live in Porto" (T1), then "I live
# in Faro" (T2); memory 4, "I like green tea", was merged into memory 2 at T3 (and so
# deleted); memory 5 was deleted, so ids stop at 5.
MEMORIES = [
    (1, "I live in Faro", "", 0, T0, T2),
    (2, "I like tea", "", 0, T0, T3),
]
HISTORY = [
    (1, "add", "", "I live in Lisbon", 0, SESSION, 7, T0),
    (1, "update", "I live in Lisbon", "I live in Porto", 0, SESSION, 8, T1),
    (1, "update", "I live in Porto", "I live in Faro", 0, SESSION, 9, T2),
    (2, "merge", "I like green tea", "I like tea", 4, SESSION, 10, T3),
]
INSERT_MEMORY = (
    "INSERT INTO memories (id, tenant_id, user_id, content, content_hash, source_session_id,"
    " source_message_id, created_at, updated_at, embedding, embedding_model, embedding_dims,"
    " embedded_at) VALUES ({})"
)
INSERT_HISTORY = (
    "INSERT INTO memory_history (memory_id, tenant_id, user_id, action, old_content,"
    " new_content, replaced_memory_id, method, source_session_id, source_message_id,"
    " changed_at) VALUES ({})"
)


def _memory_rows() -> list[tuple[Any, ...]]:
    return [
        (mid, "default", "alice", text, f"{mid:032x}", s, m, c, u, VECTOR, "model-a", 4, u)
        for mid, text, s, m, c, u in MEMORIES
    ]


def _history_rows() -> list[tuple[Any, ...]]:
    return [
        (mid, "default", "alice", action, old, new, replaced, "rule-fallback", s, m, at)
        for mid, action, old, new, replaced, s, m, at in HISTORY
    ]


def _sqlite_before(path: Path) -> None:
    from contextd.store.memory.fts5_index import fts_terms

    conn: sqlite3.Connection = _database_of_version(path, 13)
    marks = ", ".join("?" * 13)
    conn.executemany(INSERT_MEMORY.format(marks), _memory_rows())
    conn.execute("UPDATE sqlite_sequence SET seq = 5 WHERE name = 'memories'")
    conn.executemany(INSERT_HISTORY.format(", ".join("?" * 11)), _history_rows())
    for mid, text, *_ in MEMORIES:
        conn.execute(
            "INSERT INTO memories_fts (rowid, terms) VALUES (?, ?)", (mid, fts_terms("alice", text))
        )
    conn.close()


async def _postgresql_before(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at DOUBLE PRECISION NOT NULL)"
        )
        for version, name, sql in migration_files(POSTGRESQL_MIGRATIONS)[:8]:
            await conn.execute(sql)
            await conn.execute(
                "INSERT INTO schema_migrations VALUES ($1, $2, $3)", version, name, time.time()
            )
        marks = ", ".join(f"${i}" for i in range(1, 14))
        await conn.executemany(INSERT_MEMORY.format(marks), _memory_rows())
        await conn.execute("SELECT setval(pg_get_serial_sequence('memories', 'id'), 5)")
        await conn.executemany(
            INSERT_HISTORY.format(", ".join(f"${i}" for i in range(1, 12))), _history_rows()
        )
        for mid, text, *_ in MEMORIES:
            await conn.execute(
                "UPDATE memories SET search_terms = array_to_tsvector($1::text[]) WHERE id = $2",
                keyed_terms("alice", text),
                mid,
            )
    finally:
        await conn.close()


@pytest.fixture(params=["sqlite", "postgresql"])
async def upgraded(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """The store opened, as a server opens it, on a database of the version before."""
    url = ""
    if request.param == "sqlite":
        _sqlite_before(tmp_path / DB_FILENAME)
        versions = migration_files(SQLITE_MIGRATIONS)
    else:
        server: PostgresServer = request.getfixturevalue("postgres")
        name = f"upgrade_{time.time_ns()}"
        url = server.create_database(name)
        await _postgresql_before(url)
        versions = migration_files(POSTGRESQL_MIGRATIONS)
    store = await open_store(url, tmp_path, pool_size=2)
    try:
        assert await store.db.schema_version() == len(versions)
        yield store
    finally:
        await store.close()


async def test_nothing_is_lost(upgraded: Store) -> None:
    db = upgraded.db
    repo = MemoryRepo(db, upgraded.memory_index)
    # What is current is what was there, ids and vectors kept.
    current, _ = await repo.list_memories("alice")
    assert [(m.id, m.content, m.superseded_by) for m in current] == [
        (2, "I like tea", 0),
        (1, "I live in Faro", 0),
    ]
    faro = next(m for m in current if m.id == 1)
    assert faro.valid_from == T2 and faro.valid_to is None and faro.created_at == T0
    rows = await db.reader.execute_fetchall(
        "SELECT embedding, embedding_model FROM memories WHERE id = 1"
    )
    assert bytes(rows[0]["embedding"]) == VECTOR and rows[0]["embedding_model"] == "model-a"
    assert [h.memory.id for h in await repo.search("alice", "Lisbon")] == []

    # The old facts, each as of its own time, with the source of the text it was.
    def as_of(t: float) -> MemoryFilter:
        return MemoryFilter(as_of=t)

    [lisbon] = await repo.search("alice", "Lisbon", memory_filter=as_of(T0 + 1))
    past = lisbon.memory
    assert (past.content, past.superseded_by, past.valid_from, past.valid_to) == (
        "I live in Lisbon",
        1,
        T0,
        T1,
    )
    assert (past.source_session_id, past.source_message_id) == (SESSION, 7)
    assert past.id > 5  # a new id, above every id given before
    then, _ = await repo.list_memories("alice", memory_filter=as_of(T1 + 1))
    assert sorted(m.content for m in then) == ["I like green tea", "I like tea", "I live in Porto"]
    [green] = [m for m in then if m.content == "I like green tea"]
    assert (green.id, green.superseded_by, green.valid_from, green.valid_to) == (4, 2, None, T3)
    later, _ = await repo.list_memories("alice", memory_filter=as_of(T3 + 1))
    assert sorted(m.content for m in later) == ["I like tea", "I live in Faro"]
    # The history names the memories that keep the old texts.
    history = await MemoryHistoryRepo(db, repo).for_memory(1)
    kept = {
        m.content: m.id
        for m in (await repo.list_memories("alice", memory_filter=as_of(T0 + 1)))[0]
        + (await repo.list_memories("alice", memory_filter=as_of(T1 + 1)))[0]
    }
    assert [(h.action, h.replaced_memory_id) for h in history] == [
        ("add", 0),
        ("update", kept["I live in Lisbon"]),
        ("update", kept["I live in Porto"]),
    ]
    # Every memory has its hash now, and new ones get ids above the old high-water mark.
    unhashed = await db.reader.execute_fetchall("SELECT id FROM memories WHERE content_hash = ''")
    assert list(unhashed) == []
    added, created = await repo.add("alice", "I like green tea", details=MemoryDetails())
    assert created and added.id > max(kept.values())
    # Deleting memory 1 takes its past with it.
    assert await repo.delete(1)
    left, _ = await repo.list_memories("alice", memory_filter=as_of(T1 + 1))
    assert sorted(m.content for m in left) == ["I like green tea", "I like tea"]

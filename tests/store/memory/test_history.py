"""MemoryHistoryRepo on both engines: a replacement and its history row are one write, and a
user's rewrites and history stay in their tenant."""

from __future__ import annotations

import sqlite3

import pytest
from contextd.store.engine.database import Database
from contextd.store.memory.history import MemoryHistoryRepo
from contextd.store.memory.repository import MemoryRepo
from contextd.store.models import ScoredMemory
from contextd.store.open import Store

from tests.support.store_helpers import fts_integrity

A, B = "acme", "globex"
NOW = 1_800_000_000.0


@pytest.fixture
async def repo(store: Store) -> MemoryRepo:
    return MemoryRepo(store.db, store.memory_index)


def contents(hits: list[ScoredMemory]) -> list[str]:
    return [h.memory.content for h in hits]


@pytest.mark.sqlite_only
async def test_a_replacement_whose_history_row_fails_changes_no_memory(
    db: Database, repo: MemoryRepo
) -> None:
    history = MemoryHistoryRepo(db, repo)
    memory, _ = await repo.add("alice", "I live in Paris", now=NOW)
    async with db.transaction() as conn:
        await conn.execute(
            "CREATE TRIGGER refuse_history BEFORE INSERT ON memory_history"
            " BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
    with pytest.raises(sqlite3.IntegrityError):
        await history.replace(memory.id, "alice", "I live in Paris", "I live in Oslo", "x")
    # The memory, its index entry and its history roll back together.
    assert await repo.get(memory.id) == memory
    assert contents(await repo.search("alice", "Paris", now=NOW)) == ["I live in Paris"]
    assert await repo.search("alice", "Oslo", now=NOW) == []
    assert await history.for_memory(memory.id) == []
    await fts_integrity(db)


async def test_memory_rewrites_and_history_stay_in_their_tenant(db: Database, store: Store) -> None:
    memories = MemoryRepo(db, store.memory_index)
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

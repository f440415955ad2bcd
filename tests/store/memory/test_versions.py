"""A memory's versions and filters in the store, on both engines: a superseded fact
indexed apart (the search of what is current never reads it, as of its time it is
found, by terms and by meaning), a filter's scope and metadata respected by meaning
too, edits of another tenant's or user's memory finding nothing, deletion and expiry
taking a memory's past with it, and the retention task purging what expired."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from contextd.app.retention import RetentionPurger
from contextd.store.engine.database import Database
from contextd.store.event_log.removals import LogRemovals
from contextd.store.memory.filters import MemoryFilter
from contextd.store.memory.history import MemoryHistoryRepo
from contextd.store.memory.index import user_key
from contextd.store.memory.repository import MemoryRepo
from contextd.store.memory.versions import MemoryDetails, MemoryEdit
from contextd.store.open import Store
from contextd.store.retention import SessionPurge

from tests.store.memory.test_hybrid import Hybrid, _hybrid
from tests.support.fake_embeddings import InProcessEmbedder

NOW = time.time()


@pytest.fixture
def repo(store: Store) -> MemoryRepo:
    return MemoryRepo(store.db, store.memory_index)


async def _supersede(repo: MemoryRepo, db: Database, owner: tuple[str, str]) -> tuple[int, int]:
    """Alice moves from Lisbon to Porto; (memory id, id of the superseded copy)."""
    memory, _ = await repo.add(owner[1], "I live in Lisbon", tenant_id=owner[0], now=NOW - 100)
    done = await MemoryHistoryRepo(db, repo).replace(
        memory.id,
        owner[1],
        memory.content,
        "I live in Porto",
        "test",
        tenant_id=owner[0],
        now=NOW - 50,
    )
    assert done is not None and done.change is not None
    return memory.id, done.change.replaced_memory_id


async def test_a_superseded_fact_is_indexed_under_the_past_key(
    repo: MemoryRepo, db: Database
) -> None:
    memory_id, past_id = await _supersede(repo, db, ("default", "alice"))
    frequency = await repo.index.frequency(
        [user_key("alice") + "lisbon", user_key("alice", past=True) + "lisbon"], 10
    )
    assert frequency == {user_key("alice", past=True) + "lisbon": 1}
    assert await repo.search("alice", "Lisbon") == []
    [found] = await repo.search("alice", "Lisbon", memory_filter=MemoryFilter(as_of=NOW - 60))
    assert (found.memory.id, found.memory.superseded_by) == (past_id, memory_id)
    assert await repo.search("alice", "Porto", memory_filter=MemoryFilter(as_of=NOW - 60)) == []


async def test_edits_and_history_of_another_tenant_or_user_find_nothing(
    repo: MemoryRepo, db: Database
) -> None:
    memory_id, _ = await _supersede(repo, db, ("acme", "alice"))
    history = MemoryHistoryRepo(db, repo)
    change = MemoryEdit(frozenset({"content"}), "I live in Oslo")
    for owner in (("globex", "alice"), ("acme", "bob")):
        assert await history.edit(memory_id, owner, change) is None
        assert await history.page(owner, 0, 10, "") == ([], "")
        assert await repo.among(owner, [memory_id]) == []
    [kept] = await repo.among(("acme", "alice"), [memory_id])
    assert kept.content == "I live in Porto"


async def test_deleting_a_superseded_copy_forgets_its_history_row(
    repo: MemoryRepo, db: Database
) -> None:
    memory_id, past_id = await _supersede(repo, db, ("default", "alice"))
    history = MemoryHistoryRepo(db, repo)
    assert [h.replaced_memory_id for h in await history.for_memory(memory_id)] == [past_id]
    assert await repo.delete(past_id)
    assert await history.for_memory(memory_id) == []
    assert (await repo.get(memory_id)) is not None


async def test_expired_memories_go_with_their_past_and_the_retention_task_purges_them(
    repo: MemoryRepo, db: Database, store: Store, tmp_path: Path
) -> None:
    memory_id, past_id = await _supersede(repo, db, ("default", "alice"))
    await MemoryHistoryRepo(db, repo).edit(
        memory_id,
        ("default", "alice"),
        MemoryEdit(frozenset({"expires_at"}), details=MemoryDetails(expires_at=NOW + 10)),
    )
    await repo.add("alice", "I like tea", details=MemoryDetails(expires_at=NOW + 20))
    await repo.add("alice", "I like jazz")
    removals = LogRemovals(db, store.event_log(), tmp_path / "removals")
    purger = RetentionPurger(
        SessionPurge(db, removals),
        removals,
        0,
        busy=lambda _: False,
        clock=lambda: NOW + 15,
        memories=repo,
    )
    purged = await purger.run_once()
    assert (purged.memories, purged.sessions) == (2, 0)  # the memory and its past
    assert await repo.get(past_id) is None and await repo.get(memory_id) is None
    left, _ = await repo.list_memories("alice", now=NOW)
    assert [m.content for m in left] == ["I like jazz", "I like tea"]
    # Out of reads from its expiry on, before any purge.
    left, _ = await repo.list_memories("alice", now=NOW + 25)
    assert [m.content for m in left] == ["I like jazz"]


async def test_search_by_meaning_respects_the_filter_and_the_time(store: Store) -> None:
    hybrid: Hybrid = _hybrid(store, InProcessEmbedder(synonyms={"job": "work", "nurse": "work"}))
    try:
        memories = hybrid.memories
        old, _ = await memories.add("ada", "I work as a nurse", now=NOW - 100)
        await memories.add(
            "ada", "Nurse shifts go in the planner", details=MemoryDetails(app="excel")
        )
        await hybrid.settle()
        done = await MemoryHistoryRepo(hybrid.db, memories).replace(
            old.id, "ada", old.content, "I work as a baker", "test", now=NOW - 50
        )
        assert done is not None
        await hybrid.settle()
        current = await memories.search("ada", "What is my job?", 5)
        assert "I work as a nurse" not in [f.memory.content for f in current]
        then = await memories.search(
            "ada", "What is my job?", 5, memory_filter=MemoryFilter(as_of=NOW - 60, apps=("",))
        )
        assert [f.memory.content for f in then] == ["I work as a nurse"]
        excel = await memories.search(
            "ada", "What is my job?", 5, memory_filter=MemoryFilter(apps=("excel",))
        )
        assert [f.memory.content for f in excel] == ["Nurse shifts go in the planner"]
    finally:
        await hybrid.worker.aclose()

"""Memory search by terms and meaning: vectors stored with the memories, embedded in the
background, fused with the term ranking; on both engines."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from contextd.app.memory_embedding import EmbeddingRanker, EmbeddingStats, EmbeddingWorker
from contextd.store.engine.database import Database
from contextd.store.event_log.removals import LogRemovals
from contextd.store.memory.filters import MemoryFilter
from contextd.store.memory.history import MemoryHistoryRepo
from contextd.store.memory.repository import MemoryRepo
from contextd.store.memory.vectors import MemoryVectorRepo
from contextd.store.memory.versions import MemoryDetails
from contextd.store.open import Store
from contextd.store.users import UserRepo

from tests.support.fake_embeddings import InProcessEmbedder

SYNONYMS = {"vegetarian": "meat", "eat": "meat", "job": "work", "nurse": "work"}
FACTS = [
    "I am vegetarian",
    "My favourite drink is black coffee without sugar",
    "I live in Lisbon",
    "I work as a nurse in the city hospital",
]


@dataclass
class Hybrid:
    store: Store
    db: Database
    embedder: InProcessEmbedder
    memories: MemoryRepo
    vectors: MemoryVectorRepo
    worker: EmbeddingWorker
    stats: EmbeddingStats

    async def settle(self) -> None:
        """Embed what is pending now, as the worker's next pass would."""
        await self.worker.embed_pending()


def _hybrid(store: Store, embedder: InProcessEmbedder, query_timeout: float = 2.0) -> Hybrid:
    db = store.db
    vectors = MemoryVectorRepo(db, embedder.model)
    stats = EmbeddingStats()
    worker = EmbeddingWorker(embedder, vectors, stats, retry_delay=0.01, poll_interval=0.05)
    ranker = EmbeddingRanker(embedder, vectors, stats, timeout=query_timeout)
    memories = MemoryRepo(db, store.memory_index, meaning=ranker, changed=worker.wake)
    return Hybrid(store, db, embedder, memories, vectors, worker, stats)


@pytest.fixture
async def hybrid(store: Store) -> AsyncIterator[Hybrid]:
    h = _hybrid(store, InProcessEmbedder(synonyms=dict(SYNONYMS)))
    yield h
    await h.worker.aclose()


async def test_paraphrase_found_by_meaning_after_embedding(hybrid: Hybrid) -> None:
    await hybrid.memories.add_many("ada", FACTS)
    # Not embedded yet: found by terms only, and the paraphrase is not found.
    before = await hybrid.memories.search_noted("ada", "Do I eat meat?", 3)
    assert before.found == [] and before.note == ""
    await hybrid.settle()
    assert [c[1] for c in hybrid.embedder.calls] == ["query", "document"]
    found = await hybrid.memories.search("ada", "Do I eat meat?", 3)
    assert found[0].memory.content == "I am vegetarian"
    job = await hybrid.memories.search("ada", "What is my job?", 3)
    assert job[0].memory.content.startswith("I work as a nurse")
    # Terms still count: a question sharing words with its memory finds it first.
    coffee = await hybrid.memories.search("ada", "coffee", 3)
    assert coffee[0].memory.content.startswith("My favourite drink")
    assert 0 < coffee[0].relevance <= 1.0 and coffee[0].score > 0


async def test_memory_without_vector_found_by_terms(hybrid: Hybrid) -> None:
    await hybrid.memories.add("ada", "I live in Lisbon")
    found = await hybrid.memories.search("ada", "Lisbon", 5)
    assert [f.memory.content for f in found] == ["I live in Lisbon"]


async def test_query_failure_falls_back_to_terms_with_a_note(hybrid: Hybrid) -> None:
    await hybrid.memories.add_many("ada", FACTS)
    await hybrid.settle()
    hybrid.embedder.failing = 1
    result = await hybrid.memories.search_noted("ada", "black coffee", 3)
    assert result.found[0].memory.content.startswith("My favourite drink")
    assert "ranked by terms only" in result.note and "provider down" in result.note


async def test_a_filtered_search_ranks_among_the_memories_it_allows(hybrid: Hybrid) -> None:
    # The allowed ids are read beside the query's embedding, awaited before the ranking.
    await hybrid.memories.add_many("ada", FACTS)
    await hybrid.memories.add("ada", "My job is at the bakery", details=MemoryDetails(app="excel"))
    await hybrid.settle()
    plain = MemoryFilter(apps=("",))
    found = await hybrid.memories.search_noted("ada", "What is my job?", 5, memory_filter=plain)
    contents = [s.memory.content for s in found.found]
    assert contents[0] == "I work as a nurse in the city hospital" and not found.note
    assert "My job is at the bakery" not in contents
    # With the query not embedded, the ids read go unused: the search ranks by terms.
    hybrid.embedder.failing = 1
    found = await hybrid.memories.search_noted("ada", "black coffee", 3, memory_filter=plain)
    assert found.found[0].memory.content.startswith("My favourite drink")
    assert "ranked by terms only" in found.note


async def test_query_timeout_falls_back_to_terms(store: Store) -> None:
    h = _hybrid(store, InProcessEmbedder(synonyms=dict(SYNONYMS)), query_timeout=0.05)
    await h.memories.add_many("ada", FACTS)
    await h.settle()
    h.embedder.delay = 1.0
    result = await h.memories.search_noted("ada", "black coffee", 3)
    assert result.found and "no answer within" in result.note


async def test_worker_retries_after_failure_and_memory_stays(hybrid: Hybrid) -> None:
    hybrid.embedder.failing = 2
    hybrid.worker.start()
    await hybrid.memories.add("ada", "I am vegetarian")
    # Found by its terms while the provider fails.
    assert (await hybrid.memories.search("ada", "vegetarian", 3))[0].memory.content
    await asyncio.wait_for(hybrid.worker.wait_idle(), 5)
    assert hybrid.stats.failures == 2 and hybrid.stats.embedded == 1
    assert await hybrid.vectors.count_pending() == 0
    found = await hybrid.memories.search("ada", "Do I eat meat?", 3)
    assert [f.memory.content for f in found] == ["I am vegetarian"]


async def test_model_change_re_embeds(store: Store) -> None:
    first = _hybrid(store, InProcessEmbedder(model="model-a", synonyms=dict(SYNONYMS)))
    await first.memories.add_many("ada", FACTS)
    await first.settle()
    assert await first.vectors.count_pending() == 0
    second = _hybrid(store, InProcessEmbedder(model="model-b", synonyms=dict(SYNONYMS)))
    assert await second.vectors.count_pending() == len(FACTS)
    # Until re-embedded, model-a's vectors are not compared with model-b's queries.
    assert await second.memories.search("ada", "Do I eat meat?", 3) == []
    await second.settle()
    found = await second.memories.search("ada", "Do I eat meat?", 3)
    assert found[0].memory.content == "I am vegetarian"


async def test_another_users_memories_never_returned(hybrid: Hybrid) -> None:
    await hybrid.memories.add("ada", "I am vegetarian")
    await hybrid.memories.add("bob", "I am vegetarian too")
    await hybrid.memories.add("ada", "I live in Lisbon", tenant_id="acme")
    await hybrid.settle()
    found = await hybrid.memories.search("ada", "Do I eat meat?", 10)
    assert [(f.memory.user_id, f.memory.tenant_id) for f in found] == [("ada", "default")]
    assert await hybrid.vectors.nearest(("default", "carol"), [1.0] * 64, 5) == []


async def test_delete_removes_vectors(hybrid: Hybrid, tmp_path: Path) -> None:
    memory, _ = await hybrid.memories.add("ada", "I am vegetarian")
    await hybrid.memories.add("bob", "I am vegetarian")
    await hybrid.settle()
    assert await hybrid.memories.search("ada", "Do I eat meat?", 3)
    await hybrid.memories.delete(memory.id)
    assert await hybrid.memories.search("ada", "Do I eat meat?", 3) == []
    events = hybrid.store.event_log()
    removals = LogRemovals(hybrid.db, events, tmp_path / "log-removals")
    await UserRepo(hybrid.db, hybrid.memories, removals).erase("bob")
    await events.aclose()
    assert await hybrid.vectors.nearest(("default", "bob"), [1.0] * 64, 5) == []
    rows = await hybrid.db.reader.execute_fetchall(
        "SELECT COUNT(*) FROM memories WHERE embedding IS NOT NULL"
    )
    assert int(next(iter(rows))[0]) == 0


async def test_changed_text_loses_its_vector_until_re_embedded(hybrid: Hybrid) -> None:
    memory, _ = await hybrid.memories.add("ada", "I live in Lisbon")
    await hybrid.settle()
    history = MemoryHistoryRepo(hybrid.db, hybrid.memories)
    done = await history.replace(
        memory.id, "ada", "I live in Lisbon", "I am vegetarian", "test", "", 0
    )
    assert done is not None
    assert await hybrid.vectors.count_pending() == 1
    await hybrid.settle()
    found = await hybrid.memories.search("ada", "Do I eat meat?", 3)
    assert [f.memory.content for f in found] == ["I am vegetarian"]


async def test_stale_vector_not_stored_for_changed_text(hybrid: Hybrid) -> None:
    memory, _ = await hybrid.memories.add("ada", "I live in Lisbon")
    pending = await hybrid.vectors.pending()
    history = MemoryHistoryRepo(hybrid.db, hybrid.memories)
    await history.replace(memory.id, "ada", "I live in Lisbon", "I live in Porto", "test", "", 0)
    assert await hybrid.vectors.save(pending, [[1.0] * 64]) == 0
    # The new text, and the old one kept as a superseded memory (it had no vector yet).
    assert [p.content for p in await hybrid.vectors.pending()] == [
        "I live in Porto",
        "I live in Lisbon",
    ]


async def test_a_refused_text_does_not_hold_up_the_others(hybrid: Hybrid) -> None:
    hybrid.embedder.refuse = {"I live in Lisbon"}
    await hybrid.memories.add_many("ada", FACTS)
    assert await hybrid.worker.embed_pending() == len(FACTS) - 1
    assert await hybrid.vectors.count_pending() == 0  # not tried again and again
    assert (await hybrid.memories.search("ada", "Lisbon", 3))[0].memory.content == (
        "I live in Lisbon"
    )
    found = await hybrid.memories.search("ada", "Do I eat meat?", 3)
    assert found[0].memory.content == "I am vegetarian"


async def test_worker_embeds_what_was_left_unembedded_when_it_starts(hybrid: Hybrid) -> None:
    await hybrid.memories.add_many("ada", FACTS)  # before the worker runs: a restart
    hybrid.worker.start()
    await asyncio.wait_for(hybrid.worker.wait_idle(), 5)
    assert await hybrid.vectors.count_pending() == 0
    assert hybrid.stats.embedded == len(FACTS)


async def test_a_refused_query_is_searched_by_terms_without_a_failure(hybrid: Hybrid) -> None:
    await hybrid.memories.add_many("ada", FACTS)
    await hybrid.settle()
    hybrid.embedder.refuse = {"black coffee"}
    result = await hybrid.memories.search_noted("ada", "black coffee", 3)
    assert result.found[0].memory.content.startswith("My favourite drink")
    assert result.note == "ranked by terms only: fake: input refused"
    assert hybrid.stats.failures == 0


async def test_dated_memories_do_not_push_aside_the_memory_closest_in_meaning(
    store: Store,
) -> None:
    """The memory the model ranks first stays first when newer memories share a word with
    the question. The fused score used to weigh recency by a quarter against a relevance
    made of reciprocal ranks, all close together: a memory found only by its terms tied
    with the one found only by meaning, and the newer of the two won, so that among
    memories of different dates hybrid search lost most of what the model found."""
    h = _hybrid(store, InProcessEmbedder(synonyms=dict(SYNONYMS)))
    now = 1_800_000_000.0
    day = 86400.0
    answer = "I am vegetarian"
    # Each shares "eat" with the question; their many other words keep them far in meaning.
    newer = [
        f"We eat out with friends from the {club} club, then walk home along the river "
        f"and stop for ice cream, music, jokes, photos and long talks on day {i}"
        for i, club in enumerate(("climbing", "chess", "rowing", "cycling", "choir"))
    ]
    await h.memories.add_many(
        "ada", [answer, *newer], timestamps=[now - 90 * day] + [now - i * day for i in range(5)]
    )
    await h.settle()
    found = await h.memories.search("ada", "Do I eat meat?", 3, now=now)
    assert found[0].memory.content == answer


async def test_a_period_the_question_names_ranks_the_memories_dated_in_it(store: Store) -> None:
    """Two memories alike in words and meaning, told in May and in July: the question's
    month decides which comes first (a memory may say only "last weekend")."""
    h = _hybrid(store, InProcessEmbedder())
    may, july = 1_747_000_000.0, 1_752_500_000.0  # 11 May 2025, 14 July 2025
    await h.memories.add_many(
        "ada",
        ["I cooked lasagne for friends last weekend", "I cooked risotto for friends last weekend"],
        timestamps=[may, july],
    )
    await h.settle()
    now = july + 86400
    asked = "Which dish did I cook for friends last weekend in {}?"
    found = await h.memories.search("ada", asked.format("May 2025"), 2, now=now)
    assert found[0].memory.content == "I cooked lasagne for friends last weekend"
    found = await h.memories.search("ada", asked.format("July"), 2, now=now)
    assert found[0].memory.content == "I cooked risotto for friends last weekend"


async def test_a_question_naming_someone_is_embedded_with_and_without_the_name(
    hybrid: Hybrid,
) -> None:
    await hybrid.memories.add_many("ada", FACTS)
    await hybrid.settle()
    hybrid.embedder.calls.clear()
    await hybrid.memories.search("ada", "Does Melanie eat meat?", 3)
    assert hybrid.embedder.calls == [(["Does Melanie eat meat?", "Does eat meat?"], "query")]
    hybrid.embedder.calls.clear()
    await hybrid.memories.search("ada", "Do I eat meat?", 3)
    assert hybrid.embedder.calls == [(["Do I eat meat?"], "query")]

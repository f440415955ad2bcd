"""A search's second hop: the memories about a name the best memory gives (a question in
two steps, "What does my sister do?"), through the real search path on both engines."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from contextd.app.memory_embedding import EmbeddingRanker, EmbeddingStats, EmbeddingWorker
from contextd.store.memory.filters import MemoryFilter
from contextd.store.memory.repository import MemoryRepo
from contextd.store.memory.vectors import MemoryVectorRepo
from contextd.store.memory.versions import MemoryDetails
from contextd.store.open import Store

from tests.support.fake_embeddings import InProcessEmbedder

# Words of one meaning, to the fake model (Chinese text is one word to it: no two
# Chinese texts are close).
SYNONYMS = {"works": "work", "living": "work", "job": "work", "sibling": "sister"}
SISTER = "My sister is called Emily."
DENTIST = "Emily works as a dentist in Leeds."
LIFE = [
    SISTER,
    DENTIST,
    "Emily has a cat called Tom.",
    "On 3 May 2025 I went hiking with Emily, who works too hard.",
    "I work as a nurse in the city hospital.",
    "Oscar works as a pilot in Cork.",
    "Priya works as a chef in Bergen.",
    "Felix works as a lawyer in Turin.",
    "Zoe works as a vet in Graz.",
    "Maya works as a plumber in Basel.",
    "Ravi works as a teacher in Bristol.",
]
QUESTION = "What does my sister do for a living?"
DAY = 86400.0
NOW = 1_800_000_000.0


class Memories(MemoryRepo):
    """The repository, with its memories embedded on demand (as the worker's next pass)."""

    worker: EmbeddingWorker

    async def embed_now(self) -> None:
        await self.worker.embed_pending()


@pytest.fixture
async def memories(store: Store) -> AsyncIterator[Memories]:
    db = store.db
    embedder = InProcessEmbedder(synonyms=dict(SYNONYMS))
    vectors = MemoryVectorRepo(db, embedder.model)
    stats = EmbeddingStats()
    worker = EmbeddingWorker(embedder, vectors, stats)
    ranker = EmbeddingRanker(embedder, vectors, stats)
    repo = Memories(db, store.memory_index, meaning=ranker, changed=worker.wake)
    repo.worker = worker
    yield repo
    await worker.aclose()


async def _add(repo: Memories, user: str, texts: list[str]) -> None:
    # The answer is the oldest memory, so recency cannot bring it up.
    stamps = [NOW - (len(texts) - i) * DAY for i in range(len(texts))]
    stamps[texts.index(DENTIST)] = NOW - 400 * DAY if DENTIST in texts else 0
    await repo.add_many(user, texts, timestamps=stamps)
    await repo.embed_now()


async def test_the_named_persons_memory_follows_the_memory_that_names_them(
    memories: Memories,
) -> None:
    await _add(memories, "ada", LIFE)
    found = [s.memory.content for s in await memories.search("ada", QUESTION, 5, now=NOW)]
    assert found[:2] == [SISTER, DENTIST]
    # Only memories about Emily (that she opens) are followed: the hike mentions her.
    assert "On 3 May 2025 I went hiking with Emily, who works too hard." not in found[1:3]
    scored = await memories.search("ada", QUESTION, 5, now=NOW)
    assert [s.score for s in scored] == sorted((s.score for s in scored), reverse=True)


async def test_no_second_hop_from_a_memory_sharing_no_word_with_the_question(
    memories: Memories,
) -> None:
    """A best memory found by meaning alone may be a wrong guess: its names are not
    followed."""
    await _add(memories, "ada", ["My sibling is called Emily.", DENTIST, "I like tea."])
    found = await memories.search("ada", "Who is my sister?", 3, now=NOW)
    assert [s.memory.content for s in found] == ["My sibling is called Emily."]


async def test_second_hop_in_chinese(memories: Memories) -> None:
    facts = ["用户的姐姐叫王芳", "王芳在杭州当牙医", "2025年3月5日用户和王芳一起爬山"]
    facts.append("用户喜欢喝茶")
    await memories.add_many("li", facts, timestamps=[NOW - 3 * DAY, NOW - 300 * DAY, NOW, NOW])
    await memories.embed_now()
    found = [s.memory.content for s in await memories.search("li", "我姐姐是做什么的", 3, now=NOW)]
    # The hike mentions 王芳 but is not about her.
    assert found == ["用户的姐姐叫王芳", "王芳在杭州当牙医"]


async def test_second_hop_keeps_to_the_filter_and_the_user(memories: Memories) -> None:
    await memories.add("ada", SISTER, now=NOW - DAY)
    await memories.add("ada", DENTIST, now=NOW - DAY, details=MemoryDetails(app="excel"))
    await memories.add("bob", "Emily works as a pilot in Cork.", now=NOW - DAY)
    await memories.embed_now()
    plain = MemoryFilter(apps=("",))
    found = await memories.search("ada", QUESTION, 5, now=NOW, memory_filter=plain)
    assert [s.memory.content for s in found] == [SISTER]
    found = await memories.search("ada", QUESTION, 5, now=NOW)
    assert [s.memory.content for s in found] == [SISTER, DENTIST]


async def test_a_search_reads_the_state_of_the_users_vectors_once(
    memories: Memories, store: Store
) -> None:
    # The second hop (and a question's cosines without its names) compare other texts
    # with the vectors the search already checked: no read of their state per text.
    await _add(memories, "ada", LIFE)
    await memories.search("ada", QUESTION, 5, now=NOW)  # the vectors read and kept
    statements: list[str] = []
    store.db.time_statements(lambda sql, _: statements.append(sql))
    found = [s.memory.content for s in await memories.search("ada", QUESTION, 5, now=NOW)]
    assert found[:2] == [SISTER, DENTIST]  # the second hop ran
    assert sum("embedded_at" in sql for sql in statements) == 1, statements

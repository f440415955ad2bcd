"""MemoryRepo on both engines: dedup, Chinese/English search, ranking, isolation (of users and
of tenants), paging, bulk loads, the index rebuilt for new terms, users known to have no
memories."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from contextd.core.errors import SessionNotFound
from contextd.core.search_terms import TERMS_VERSION
from contextd.store.engine.database import Database
from contextd.store.memory import index as memory_index
from contextd.store.memory import repository as memories_module
from contextd.store.memory.history import MemoryHistoryRepo
from contextd.store.memory.repository import MemoryRepo
from contextd.store.models import ScoredMemory
from contextd.store.open import Store, open_store
from contextd.store.sessions import SessionRepo

from tests.support.store_helpers import fts_integrity

A, B = "acme", "globex"
DAY = 86400.0
NOW = 1_800_000_000.0


@pytest.fixture
async def repo(store: Store) -> MemoryRepo:
    return MemoryRepo(store.db, store.memory_index)


@pytest.fixture
async def sources(db: Database) -> list[str]:
    """Three of alice's sessions, for memories that name the session they come from."""
    sessions = SessionRepo(db)
    return [(await sessions.create("alice")).id for _ in range(3)]


def contents(hits: list[ScoredMemory]) -> list[str]:
    return [h.memory.content for h in hits]


async def test_add_stores_a_memory_with_provenance(repo: MemoryRepo, sources: list[str]) -> None:
    memory, created = await repo.add("alice", "  我每天早上都喝咖啡  ", sources[0], 42, now=NOW)
    assert created
    assert memory.content == "我每天早上都喝咖啡"
    assert (memory.user_id, memory.source_session_id, memory.source_message_id) == (
        "alice",
        sources[0],
        42,
    )
    assert memory.created_at == memory.updated_at == NOW
    assert await repo.get(memory.id) == memory
    assert await repo.get(memory.id + 1000) is None


@pytest.mark.parametrize(
    "variant",
    [
        "I like green tea",
        "i like GREEN tea",
        "  I  like\tgreen tea. ",
        "Ｉ ｌｉｋｅ ｇｒｅｅｎ ｔｅａ",
    ],
)
async def test_same_memory_is_stored_once_per_user(
    repo: MemoryRepo, variant: str, sources: list[str]
) -> None:
    first, created = await repo.add("alice", "I like green tea", sources[0], 1, now=NOW)
    again, created_again = await repo.add("alice", variant, sources[1], 2, now=NOW + 60)
    assert created and not created_again
    assert again.id == first.id
    # The first wording and provenance stay; stating it again makes it current.
    assert (again.content, again.source_session_id, again.source_message_id) == (
        "I like green tea",
        sources[0],
        1,
    )
    assert again.created_at == NOW and again.updated_at == NOW + 60
    assert await repo.count("alice") == 1
    other, created_other = await repo.add("bob", variant, now=NOW)
    assert created_other and other.id != first.id


async def test_stating_a_memory_again_with_an_older_time_keeps_updated_at(
    repo: MemoryRepo,
) -> None:
    await repo.add("alice", "I like tea", now=NOW)
    again, _ = await repo.add("alice", "I like tea", now=NOW - DAY)
    assert again.updated_at == NOW


async def test_concurrent_adds_of_one_memory_create_it_once(repo: MemoryRepo) -> None:
    results = await asyncio.gather(*(repo.add("alice", "我喜欢猫") for _ in range(10)))
    assert sum(created for _, created in results) == 1
    assert len({m.id for m, _ in results}) == 1
    assert len(await repo.search("alice", "猫")) == 1


@pytest.mark.parametrize("content", ["", "   ", "\n\t"])
async def test_blank_content_is_refused(repo: MemoryRepo, content: str) -> None:
    with pytest.raises(ValueError, match="blank"):
        await repo.add("alice", content)


async def test_empty_user_is_refused(repo: MemoryRepo) -> None:
    with pytest.raises(ValueError, match="user_id"):
        await repo.add("", "something")
    with pytest.raises(ValueError, match="user_id"):
        await repo.add_many("", ["something"])


async def test_two_character_chinese_word_finds_the_memory(repo: MemoryRepo) -> None:
    await repo.add("alice", "我每天早上都喝咖啡")
    await repo.add("alice", "我住在上海")
    assert contents(await repo.search("alice", "咖啡")) == ["我每天早上都喝咖啡"]
    assert contents(await repo.search("alice", "上海")) == ["我住在上海"]
    assert await repo.search("alice", "北京") == []


async def test_single_chinese_character_finds_the_memory(repo: MemoryRepo) -> None:
    await repo.add("alice", "我养了一只猫")
    await repo.add("alice", "我每天早上都喝咖啡")
    assert contents(await repo.search("alice", "猫")) == ["我养了一只猫"]


async def test_chinese_phrase_ranks_the_better_match_first(repo: MemoryRepo) -> None:
    await repo.add("alice", "我每天下午都喝茶", now=NOW)
    await repo.add("alice", "我每天早上都喝咖啡", now=NOW - 10 * DAY)
    await repo.add("alice", "咖啡豆放在柜子里", now=NOW)
    hits = await repo.search("alice", "喝咖啡", now=NOW)
    assert contents(hits)[0] == "我每天早上都喝咖啡"
    assert hits[0].relevance == pytest.approx(1.0)
    # The tea memory shares no word with the query (only the character 喝).
    assert "我每天下午都喝茶" not in contents(hits)
    assert contents(await repo.search("alice", "喝茶", now=NOW))[0] == "我每天下午都喝茶"


async def test_english_word_finds_the_memory(repo: MemoryRepo) -> None:
    await repo.add("alice", "I drink coffee every morning")
    await repo.add("alice", "My cat is called Mimi")
    for query in ("coffee", "COFFEE", "coffees", "Coffee?", "drinks", "what do I drink"):
        assert contents(await repo.search("alice", query)) == ["I drink coffee every morning"]
    assert contents(await repo.search("alice", "cats")) == ["My cat is called Mimi"]


async def test_mixed_text_and_queries(repo: MemoryRepo) -> None:
    await repo.add("alice", "我用 VS Code 写Python代码")
    await repo.add("alice", "Prefers answers in 中文, short")
    for query in ("python", "写代码", "Python代码", "vs code", "代码 python"):
        assert contents(await repo.search("alice", query)) == ["我用 VS Code 写Python代码"]
    assert contents(await repo.search("alice", "中文 answers")) == [
        "Prefers answers in 中文, short"
    ]


async def test_fullwidth_and_accents_match_their_plain_forms(repo: MemoryRepo) -> None:
    await repo.add("alice", "Ｍｙ ｆａｖｏｒｉｔｅ ｃａｆé is downstairs")
    assert len(await repo.search("alice", "Cafe")) == 1
    assert len(await repo.search("alice", "favorite")) == 1


async def test_more_relevant_memory_ranks_first(repo: MemoryRepo) -> None:
    await repo.add("alice", "coffee beans are in the cupboard, buy a new coffee cup", now=NOW)
    await repo.add("alice", "I drink black coffee every morning", now=NOW)
    hits = await repo.search("alice", "black coffee in the morning", now=NOW)
    assert contents(hits) == [
        "I drink black coffee every morning",
        "coffee beans are in the cupboard, buy a new coffee cup",
    ]
    assert hits[0].relevance == pytest.approx(1.0)
    assert 0 < hits[1].relevance < 0.7


async def test_recency_decides_between_equally_relevant_memories(repo: MemoryRepo) -> None:
    await repo.add("alice", "I like green tea", now=NOW - 200 * DAY)
    await repo.add("alice", "I like black tea", now=NOW - 1 * DAY)
    hits = await repo.search("alice", "tea", now=NOW)
    assert contents(hits) == ["I like black tea", "I like green tea"]
    assert hits[0].relevance == pytest.approx(hits[1].relevance)
    assert hits[0].recency == pytest.approx(0.5 ** (1 / 30))
    assert hits[1].recency == pytest.approx(0.5 ** (200 / 30))
    # Seen from 300 days earlier the green tea memory is the newer one... and in the future
    # relative to "now": an age below zero counts as zero.
    earlier = await repo.search("alice", "tea", now=NOW - 199 * DAY)
    assert contents(earlier) == ["I like black tea", "I like green tea"]
    assert earlier[0].recency == pytest.approx(1.0)


async def test_stating_a_memory_again_makes_it_rank_as_recent(repo: MemoryRepo) -> None:
    await repo.add("alice", "I like green tea", now=NOW - 200 * DAY)
    await repo.add("alice", "I like black tea", now=NOW - 100 * DAY)
    assert contents(await repo.search("alice", "tea", now=NOW))[0] == "I like black tea"
    await repo.add("alice", "i like green tea.", now=NOW)
    assert contents(await repo.search("alice", "tea", now=NOW))[0] == "I like green tea"


async def test_strong_relevance_beats_recency(repo: MemoryRepo) -> None:
    await repo.add("alice", "我每天早上都喝咖啡", now=NOW - 365 * DAY)
    await repo.add("alice", "咖啡豆放在柜子里，记得买新的杯子", now=NOW)
    hits = await repo.search("alice", "早上喝咖啡", now=NOW)
    assert contents(hits)[0] == "我每天早上都喝咖啡"
    assert hits[1].recency == pytest.approx(1.0) and hits[0].recency < 0.001


async def test_score_combines_relevance_and_recency(store: Store) -> None:
    repo = MemoryRepo(store.db, store.memory_index, half_life_days=10, recency_weight=0.4)
    await repo.add("alice", "I like green tea", now=NOW - 10 * DAY)
    await repo.add("alice", "tea", now=NOW - 20 * DAY)
    hits = await repo.search("alice", "green tea", now=NOW)
    for hit in hits:
        assert 0 < hit.relevance <= 1 and 0 < hit.recency <= 1
        assert hit.score == pytest.approx(0.6 * hit.relevance + 0.4 * hit.recency)
    assert [h.recency for h in hits] == pytest.approx([0.5, 0.25])
    assert hits == sorted(hits, key=lambda h: h.score, reverse=True)


async def test_limit_and_ordering_on_many_matches(repo: MemoryRepo) -> None:
    texts = [f"第{i}条记录：我喜欢喝咖啡" + "，真的" * (i % 7) for i in range(300)]
    stamps = [NOW - (300 - i) * DAY / 10 for i in range(300)]
    assert await repo.add_many("alice", texts, timestamps=stamps) == 300
    hits = await repo.search("alice", "喝咖啡", limit=10, now=NOW)
    assert len(hits) == 10
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert len(await repo.search("alice", "咖啡", limit=1000)) == memories_module.MAX_SEARCH_LIMIT
    with pytest.raises(ValueError, match="limit"):
        await repo.search("alice", "咖啡", limit=0)


async def test_common_terms_do_not_hide_rare_ones(store: Store) -> None:
    repo = MemoryRepo(store.db, store.memory_index, max_ranked=5)
    await repo.add_many("alice", [f"我的第{i}个同事喜欢爬山" for i in range(30)], now=NOW)
    await repo.add("alice", "我的女儿叫小米", now=NOW - 300 * DAY)
    hits = await repo.search("alice", "我的女儿", now=NOW)
    assert contents(hits)[0] == "我的女儿叫小米"
    # A query whose only term is common still answers, from its newest matches.
    assert len(await repo.search("alice", "同事", now=NOW)) == 5


async def test_the_rarest_terms_are_chosen_within_the_budget(store: Store) -> None:
    # kiwi is in 1 memory, mango in 2, papaya in 3: with a budget of 4 matches the search
    # ranks kiwi and mango (1 + 2) and leaves papaya (1 + 2 + 3 > 4) out, as choose_terms.
    repo = MemoryRepo(store.db, store.memory_index, max_ranked=4)
    fruit = ["kiwi", "mango", "mango", "papaya", "papaya", "papaya"]
    await repo.add_many("alice", [f"Memory {i}: {name}" for i, name in enumerate(fruit)], now=NOW)
    found = contents(await repo.search("alice", "papaya mango kiwi", now=NOW))
    assert sorted(found) == ["Memory 0: kiwi", "Memory 1: mango", "Memory 2: mango"]
    # The rarest term is always chosen, over the budget or not.
    assert len(await repo.search("alice", "papaya", now=NOW)) == 3

    def query(*terms: str, most: int | None = None) -> memory_index.TermQuery:
        keyed = [memory_index.user_key("alice") + t for t in terms]
        return memory_index.TermQuery(keyed, 3, most)  # kiwi (1) + papaya (3) > 3

    where, params = "1 = 1", {
        "now": NOW, "half_life": DAY, "tenant_id": "default", "user_id": "alice",
        "weight": 0.25, "limit": 10, "candidates": 50,
    }  # fmt: skip
    index = store.memory_index
    # most: nothing when even the rarest term is in more memories than that.
    too_common = await index.search(query("papaya", most=2), params, where)
    assert (list(too_common.rows), too_common.matched) == ([], True)
    rare = await index.search(query("papaya", "kiwi", most=2), params, where)
    assert [row["content"] for row in rare.rows] == ["Memory 0: kiwi"]
    # matched: whether any term is in any memory (a user with none is remembered so).
    unknown = await index.search(query("durian"), params, where)
    assert (list(unknown.rows), unknown.matched) == ([], False)


@pytest.mark.parametrize(
    "query",
    [
        "",
        " ",
        "!!!",
        "。？！",
        '"',
        '""',
        "'",
        "*",
        "coffee*",
        "^coffee",
        "NEAR(coffee tea)",
        "NEAR/2",
        "AND",
        "OR",
        "NOT",
        "coffee AND",
        "coffee OR NOT tea",
        "terms:coffee",
        "{terms}: coffee",
        "-coffee",
        "(coffee",
        ")",
        'coffee"tea',
        "a:b:c",
        "%",
        "_",
        "\\",
        "\x00",
        "😀",
        "咖啡*",
        '"咖啡" AND "茶"',
        "x" * 5000,
        "咖啡" * 3000,
    ],
)
async def test_odd_queries_never_raise(repo: MemoryRepo, query: str) -> None:
    await repo.add("alice", "I drink coffee every morning")
    await repo.add("alice", "我每天早上都喝咖啡")
    hits = await repo.search("alice", query)
    assert isinstance(hits, list)
    assert all(h.memory.user_id == "alice" for h in hits)


async def test_query_without_terms_finds_nothing(repo: MemoryRepo) -> None:
    await repo.add("alice", "!!! ... ???")
    assert await repo.search("alice", "!!!") == []
    assert await repo.search("alice", "   ") == []


async def test_fts_syntax_words_are_searched_as_words(repo: MemoryRepo) -> None:
    await repo.add("alice", "We met near the station")
    await repo.add("alice", "I drink coffee every morning")
    assert contents(await repo.search("alice", "NEAR")) == ["We met near the station"]
    assert contents(await repo.search("alice", "coffee AND")) == ["I drink coffee every morning"]


async def test_users_never_see_each_others_memories(repo: MemoryRepo) -> None:
    await repo.add("alice", "我每天早上都喝咖啡")
    await repo.add_many("bob", ["我每天早上都喝咖啡", "我也喜欢咖啡", "coffee is life"])
    hits = await repo.search("alice", "咖啡")
    assert [h.memory.user_id for h in hits] == ["alice"]
    assert await repo.search("alice", "coffee") == []
    assert await repo.count("alice") == 1 and await repo.count("bob") == 3
    page, _ = await repo.list_memories("alice")
    assert [m.user_id for m in page] == ["alice"]
    assert await repo.search("nobody", "咖啡") == []
    assert await repo.count("nobody") == 0


async def test_isolation_holds_even_if_user_keys_collide(
    repo: MemoryRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_index, "user_key", lambda *owner, past=False: "0" * 16)
    await repo.add("alice", "我每天早上都喝咖啡")
    await repo.add("bob", "我也喝咖啡")
    assert contents(await repo.search("alice", "咖啡")) == ["我每天早上都喝咖啡"]
    assert contents(await repo.search("bob", "咖啡")) == ["我也喝咖啡"]


async def test_delete_removes_the_memory_from_search(repo: MemoryRepo, db: Database) -> None:
    coffee, _ = await repo.add("alice", "我每天早上都喝咖啡")
    await repo.add("alice", "我住在上海")
    assert await repo.delete(coffee.id)
    assert await repo.get(coffee.id) is None
    assert await repo.search("alice", "咖啡") == []
    assert await repo.search("alice", "喝") == []
    assert contents(await repo.search("alice", "上海")) == ["我住在上海"]
    assert not await repo.delete(coffee.id)
    again, created = await repo.add("alice", "我每天早上都喝咖啡")
    assert created and again.id > coffee.id  # ids are never reused
    assert contents(await repo.search("alice", "咖啡")) == ["我每天早上都喝咖啡"]
    await fts_integrity(db)


async def test_list_pages_newest_first(repo: MemoryRepo) -> None:
    for i in range(7):
        await repo.add("alice", f"memory {i}", now=NOW + i)
    await repo.add("bob", "bob's memory", now=NOW + 100)
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        page, token = await repo.list_memories("alice", page_size=3, page_token=token)
        pages += 1
        seen += [m.content for m in page]
        if not token:
            break
    assert pages == 3
    assert seen == [f"memory {i}" for i in reversed(range(7))]


async def test_list_pages_through_equal_times_by_id(repo: MemoryRepo) -> None:
    await repo.add_many("alice", [f"fact {i}" for i in range(5)], now=NOW)
    first, token = await repo.list_memories("alice", page_size=2)
    second, token2 = await repo.list_memories("alice", page_size=2, page_token=token)
    third, token3 = await repo.list_memories("alice", page_size=2, page_token=token2)
    ids = [m.id for m in first + second + third]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == 5
    assert token3 == ""


async def test_list_refuses_bad_tokens_and_sizes(repo: MemoryRepo) -> None:
    await repo.add_many("alice", ["a1", "a2", "a3"])
    await repo.add_many("bob", ["b1", "b2", "b3"])
    _, token = await repo.list_memories("alice", page_size=1)
    assert token
    for bad in ("garbage", "!!!", "eyJ4IjoxfQ"):
        with pytest.raises(ValueError, match="page token"):
            await repo.list_memories("alice", page_token=bad)
    with pytest.raises(ValueError, match="page token"):
        await repo.list_memories("bob", page_token=token)
    with pytest.raises(ValueError, match="page_size"):
        await repo.list_memories("alice", page_size=-1)
    page, next_token = await repo.list_memories("alice")  # 0 = the default size
    assert len(page) == 3 and next_token == ""


async def test_a_memory_comes_only_from_a_session_of_its_user_that_is_there(
    repo: MemoryRepo, db: Database, sources: list[str]
) -> None:
    bobs = await SessionRepo(db).create("bob")
    gone = await SessionRepo(db).create("alice")
    assert await SessionRepo(db).delete(gone.id)
    for session_id in (bobs.id, gone.id, "0" * 32):
        with pytest.raises(SessionNotFound):
            await repo.add("alice", "I like tea", session_id, 1)
        with pytest.raises(SessionNotFound):
            await repo.add_many("alice", ["I like tea"], source_session_id=session_id)
    assert await repo.count("alice") == 0
    memory, _ = await repo.add("alice", "I like tea", sources[0], 1)
    history = MemoryHistoryRepo(db, repo)
    with pytest.raises(SessionNotFound):
        await history.replace(memory.id, "alice", "I like tea", "I like coffee", "x", gone.id)
    assert (await repo.get(memory.id)) == memory


async def test_add_many_counts_new_memories_and_indexes_them(
    repo: MemoryRepo, db: Database, sources: list[str]
) -> None:
    await repo.add("alice", "I like tea", now=NOW)
    created = await repo.add_many(
        "alice",
        ["我喜欢猫", "我喜欢猫。", "i like TEA", "I live in Berlin", "我喜欢狗"],
        timestamps=[NOW + 1, NOW + 2, NOW + 3, NOW + 4, NOW + 5],
        source_session_id=sources[2],
    )
    assert created == 3
    assert await repo.count("alice") == 4
    cat = (await repo.search("alice", "猫"))[0].memory
    assert (cat.content, cat.created_at, cat.updated_at, cat.source_session_id) == (
        "我喜欢猫",
        NOW + 1,
        NOW + 2,
        sources[2],
    )
    tea = (await repo.search("alice", "tea"))[0].memory
    assert tea.created_at == NOW and tea.updated_at == NOW + 3
    assert contents(await repo.search("alice", "berlin")) == ["I live in Berlin"]
    assert await repo.add_many("alice", []) == 0
    await fts_integrity(db)


async def test_add_many_checks_everything_before_writing(repo: MemoryRepo) -> None:
    with pytest.raises(ValueError, match="blank"):
        await repo.add_many("alice", ["fine", "  "])
    with pytest.raises(ValueError, match="timestamps"):
        await repo.add_many("alice", ["a", "b"], timestamps=[NOW])
    assert await repo.count("alice") == 0


async def test_index_is_rebuilt_when_built_by_another_terms_version(
    db: Database, store: Store
) -> None:
    repo = MemoryRepo(db, store.memory_index)
    await repo.add_many("alice", ["我每天早上都喝咖啡", "I drink tea"])
    forget = (
        "INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')"
        if db.engine == "sqlite"
        else "UPDATE memories SET search_terms = ''"
    )
    async with db.transaction() as conn:
        await conn.execute(forget)
        await conn.execute("UPDATE memories_fts_state SET terms_version = 0")
    fresh = MemoryRepo(db, store.memory_index)
    assert contents(await fresh.search("alice", "咖啡")) == ["我每天早上都喝咖啡"]
    rows = list(await db.reader.execute_fetchall("SELECT terms_version FROM memories_fts_state"))
    assert rows[0][0] == TERMS_VERSION
    assert await fresh.reindex() == 2
    assert contents(await fresh.search("alice", "tea")) == ["I drink tea"]
    await fts_integrity(db)


async def test_memories_survive_reopening_the_database(tmp_path: Path) -> None:
    first = await open_store("", tmp_path)
    await MemoryRepo(first.db, first.memory_index).add("alice", "我每天早上都喝咖啡")
    await first.close()
    second = await open_store("", tmp_path)
    try:
        found = await MemoryRepo(second.db, second.memory_index).search("alice", "咖啡")
        assert contents(found) == ["我每天早上都喝咖啡"]
    finally:
        await second.close()


@pytest.mark.sqlite_only
async def test_a_user_found_without_memories_is_searched_again_once_given_some(
    db: Database, store: Store
) -> None:
    memories = MemoryRepo(db, store.memory_index)
    assert await memories.search("alice", "coffee") == []
    assert await memories.search("alice", "coffee") == []  # answered from memory
    await memories.add("alice", "Alice drinks coffee")
    assert [m.memory.content for m in await memories.search("alice", "coffee")] == [
        "Alice drinks coffee"
    ]
    assert await memories.search("bob", "tea") == []
    await memories.add_many("bob", ["Bob drinks tea", "Bob likes rain"])
    assert [m.memory.content for m in await memories.search("bob", "tea")] == ["Bob drinks tea"]
    # A search that reads while a memory is being added, before its commit, does not
    # hide it afterwards.
    assert await memories.search("carol", "jazz") == []
    adding = asyncio.create_task(memories.add("carol", "Carol plays jazz"))
    async with db.transaction():  # holds the write lock: the add waits for it
        await asyncio.sleep(0)
        assert await memories.search("carol", "jazz") == []
    await adding
    assert [m.memory.content for m in await memories.search("carol", "jazz")] == [
        "Carol plays jazz"
    ]


async def test_memories_and_their_search_stay_in_their_tenant(store: Store) -> None:
    memories = MemoryRepo(store.db, store.memory_index)
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

"""The store's caches: what a cached read returns is what the database holds, after every
kind of write (new messages, token counts, collected flags, compression summaries, skills
and templates, deleted sessions)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sqlite3
from collections.abc import Iterator

import pytest
from contextd.core.errors import SessionNotFound
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.store import tail_cache
from contextd.store.catalog import CatalogRepo
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.engine.sqlite import SqliteConnection
from contextd.store.memory.repository import MemoryRepo
from contextd.store.models import NewMessage, Skill, StoredMessage
from contextd.store.sessions import SessionRepo, UsageTotals
from contextd.store.summaries import SummaryRepo


def message(role: Role, text: str, **tokens: int) -> NewMessage:
    return NewMessage(ChatMessage(role, text), turn_index=1, tokens=dict(tokens))


async def from_disk(
    db: Database, session_id: str, limit: int, tokenizer: str
) -> list[StoredMessage]:
    """The tail as a repository with nothing cached reads it."""
    return list(await ConversationRepo(db).tail(session_id, limit, tokenizer))


async def assert_tail_matches_disk(
    db: Database, repo: ConversationRepo, session_id: str, tokenizer: str = "cl"
) -> None:
    for limit in (1, 3, 64, 1000):
        cached = await repo.tail(session_id, limit, tokenizer)
        assert cached == await from_disk(db, session_id, limit, tokenizer), limit


async def test_a_new_session_is_read_from_memory_and_follows_its_appends(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions, repo = SessionRepo(db), ConversationRepo(db)
    session = await sessions.create("alice")  # created after the repo: known to be empty
    assert await repo.tail(session.id, 64, "cl") == []
    call = ToolCall("c1", "lookup", '{"q": 1}')
    await repo.append(
        session.id,
        "alice",
        [
            message(Role.USER, "hi", cl=3, est=2),
            NewMessage(ChatMessage(Role.ASSISTANT, "", (call,)), turn_index=1, tokens={"cl": 9}),
            NewMessage(ChatMessage(Role.TOOL, "42", tool_call_id="c1"), turn_index=1),
        ],
    )
    await repo.append(session.id, "alice", [NewMessage(ChatMessage(Role.ASSISTANT, "ok"), 1, "x")])

    # Served without a query: any statement now would fail the test.
    def no_query(*args: object) -> None:
        raise AssertionError("the tail was read from the database")

    monkeypatch.setattr(SqliteConnection, "execute_fetchall", no_query)
    rows = await repo.tail(session.id, 64, "cl")
    monkeypatch.undo()
    assert [r.message.content for r in rows] == ["hi", "", "42", "ok"]
    for tokenizer in ("cl", "est", "other"):
        await assert_tail_matches_disk(db, repo, session.id, tokenizer)


async def test_a_session_read_once_is_cached_and_kept_current(db: Database) -> None:
    sessions = SessionRepo(db)
    session = await sessions.create("alice")
    writer = ConversationRepo(db)
    await writer.append(session.id, "alice", [message(Role.USER, f"m{i}", cl=i) for i in range(10)])
    repo = ConversationRepo(db)  # knows nothing of the session yet
    assert [r.message.content for r in await repo.tail(session.id, 4, "cl")] == [
        "m6",
        "m7",
        "m8",
        "m9",
    ]
    await repo.append(session.id, "alice", [message(Role.ASSISTANT, "a", cl=1)])
    await assert_tail_matches_disk(db, repo, session.id)  # more than cached: read again


async def test_counts_saved_later_reach_the_cached_rows(db: Database) -> None:
    repo = ConversationRepo(db)
    session = await SessionRepo(db).create("alice")
    first, second = await repo.append(
        session.id, "alice", [message(Role.USER, "a", cl=1), message(Role.ASSISTANT, "b")]
    )
    assert [r.tokens for r in await repo.tail(session.id, 5, "new")] == [{}, {}]
    await repo.save_tokens([(first.id, "new", 7), (first.id, "new", 8)], session.id)
    await assert_tail_matches_disk(db, repo, session.id, "new")
    await repo.save_tokens([(second.id, "new", 5)], session.id)
    await assert_tail_matches_disk(db, repo, session.id, "new")
    assert [r.tokens for r in await repo.tail(session.id, 5, "new")] == [{"new": 7}, {"new": 5}]


async def test_collected_flags_and_deleted_sessions_reach_the_cache(db: Database) -> None:
    sessions = SessionRepo(db)
    repo = ConversationRepo(db)
    session = await sessions.create("alice")
    [_, answer] = await repo.append(
        session.id, "alice", [message(Role.USER, "q"), message(Role.ASSISTANT, "a")]
    )
    await repo.tail(session.id, 10, "cl")
    await repo.set_collected(answer.id, True)
    [*_, last] = await repo.tail(session.id, 10, "cl")
    assert last.is_collected
    await assert_tail_matches_disk(db, repo, session.id)
    assert await sessions.delete(session.id)
    assert await repo.tail(session.id, 10, "cl") == []


async def test_a_failed_append_leaves_nothing_stale(db: Database) -> None:
    repo = ConversationRepo(db)
    session = await SessionRepo(db).create("alice")
    await repo.append(session.id, "alice", [message(Role.USER, "q", cl=1)])
    await repo.tail(session.id, 5, "cl")
    with pytest.raises(SessionNotFound):
        await repo.append(session.id, "mallory", [message(Role.USER, "not hers")])
    await assert_tail_matches_disk(db, repo, session.id)


async def test_the_cache_keeps_to_its_bounds(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tail_cache, "TAIL_CACHE_ROWS", 5)
    monkeypatch.setattr(tail_cache, "TAIL_CACHE_SESSIONS", 2)
    sessions = SessionRepo(db)
    repo = ConversationRepo(db)
    ids = []
    for _ in range(3):
        session = await sessions.create("alice")
        await repo.append(session.id, "alice", [message(Role.USER, f"m{i}") for i in range(8)])
        ids.append(session.id)
    for session_id in ids:
        await assert_tail_matches_disk(db, repo, session_id)
    # Only the newest rows of the most recently used sessions stay.
    assert [r.message.content for r in await repo.tail(ids[0], 2, "cl")] == ["m6", "m7"]
    monkeypatch.setattr(tail_cache, "TAIL_CACHE_CHARS", 1)
    await repo.append(ids[1], "alice", [message(Role.USER, "too big to keep")])
    await assert_tail_matches_disk(db, repo, ids[1])


async def test_an_answer_and_its_usage_are_stored_together(db: Database) -> None:
    sessions = SessionRepo(db)
    session = await sessions.create("alice")
    repo = ConversationRepo(db)
    stored, totals = await repo.append_with_usage(
        session.id, "alice", [message(Role.ASSISTANT, "a")], UsageTotals(10, 2, 9)
    )
    assert [m.message.content for m in stored] == ["a"] and totals == UsageTotals(10, 2, 9)
    assert await repo.append_with_usage(session.id, "alice", [], UsageTotals(1, 1, 1)) == (
        [],
        UsageTotals(11, 3, 10),
    )
    with pytest.raises(SessionNotFound):  # another user's session: neither is written
        await repo.append_with_usage(
            session.id, "mallory", [message(Role.USER, "x")], UsageTotals(5, 5, 5)
        )
    assert await repo.append_with_usage(session.id, "alice", [], UsageTotals(0, 0, 0)) == (
        [],
        UsageTotals(11, 3, 10),
    )
    assert len(await repo.tail(session.id, 10, "cl")) == 1
    # Cache figures add up; one estimated turn marks the totals for good.
    estimated = UsageTotals(4, 2, 4, 3, 1, estimated=True)
    _, totals = await repo.append_with_usage(session.id, "alice", [], estimated)
    assert totals == UsageTotals(15, 5, 14, 3, 1, estimated=True)
    _, totals = await repo.append_with_usage(session.id, "alice", [], UsageTotals(1, 1, 1, 1))
    assert totals == UsageTotals(16, 6, 15, 4, 1, estimated=True)


async def test_the_active_compression_summary_follows_writes_and_deletes(db: Database) -> None:
    sessions, repo = SessionRepo(db), ConversationRepo(db)
    summaries = SummaryRepo(db)
    session = await sessions.create("alice")
    stored = await repo.append(session.id, "alice", [message(Role.USER, f"m{i}") for i in range(3)])
    assert await summaries.active_compression(session.id) is None
    await summaries.add_compression(session.id, [stored[0].id], stored[0].id, "first")
    active = await summaries.active_compression(session.id)
    assert active is not None and active.summary == "first"
    await summaries.add_compression(session.id, [stored[1].id], stored[1].id, "second")
    active = await summaries.active_compression(session.id)
    assert active is not None and active.summary == "second"
    assert active == await SummaryRepo(db).active_compression(session.id)  # read from disk
    await sessions.delete(session.id)
    assert await summaries.active_compression(session.id) is None


async def test_catalog_reads_follow_every_write(db: Database) -> None:
    catalog = CatalogRepo(db)
    assert await catalog.get_template("s") is None
    await catalog.upsert_template("s", "v1")
    template = await catalog.get_template("s")
    assert template is not None and template.system_prompt == "v1"
    await catalog.upsert_template("s", "v2")
    template = await catalog.get_template("s")
    assert template is not None and template.system_prompt == "v2"
    await catalog.delete_template("s")
    assert await catalog.get_template("s") is None

    assert await catalog.list_skills("excel", True) == []
    await catalog.upsert_skill(Skill("k", "d", "p", ["excel"], True))
    assert [s.name for s in await catalog.list_skills("excel", True)] == ["k"]
    await catalog.upsert_skill(Skill("k", "d", "p", ["excel"], False))
    assert await catalog.list_skills("excel", True) == []
    assert [s.enabled for s in await catalog.list_skills("excel")] == [False]
    await catalog.delete_skill("k")
    assert await catalog.list_skills("excel") == []


@pytest.mark.sqlite_only
async def test_a_user_found_without_memories_is_searched_again_once_given_some(
    db: Database,
) -> None:
    memories = MemoryRepo(db)
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


async def test_other_sessions_summaries_follow_every_summary_write_and_delete(
    db: Database,
) -> None:
    sessions, summaries = SessionRepo(db), SummaryRepo(db)
    a, b, c = [await sessions.create("alice", title=t) for t in ("A", "B", "C")]

    async def shown(exclude: str) -> list[str]:
        found = await summaries.recent_session_summaries("alice", exclude, 3)
        assert found == await SummaryRepo(db).recent_session_summaries("alice", exclude, 3)
        return [f"{s.title}: {s.summary}" for s in found]

    assert await shown(a.id) == []
    await summaries.upsert_session_summary(b.id, "alice", "b1", by_host=True)
    assert await shown(a.id) == ["B: b1"]
    assert await shown(b.id) == []
    await summaries.upsert_session_summary(
        a.id, "alice", "a1", by_host=True
    )  # not in the list without A
    assert await shown(a.id) == ["B: b1"]
    assert await shown(b.id) == ["A: a1"]
    await summaries.upsert_session_summary(c.id, "alice", "c1", by_host=True)
    await summaries.upsert_session_summary(b.id, "alice", "b2", by_host=True)
    assert await shown(a.id) == ["B: b2", "C: c1"]
    await sessions.delete(b.id)
    assert await shown(a.id) == ["C: c1"]
    with pytest.raises(SessionNotFound):
        await summaries.upsert_session_summary(c.id, "mallory", "not hers", by_host=True)
    assert await shown(a.id) == ["C: c1"]


async def test_the_first_message_comes_from_the_cached_rows_or_the_database(
    db: Database,
) -> None:
    sessions = SessionRepo(db)
    session = await sessions.create("alice")
    repo = ConversationRepo(db)
    assert await repo.first(session.id) is None
    session = await sessions.create("alice")  # created after the repo: known to be empty
    assert await repo.first(session.id) is None
    await repo.append(session.id, "alice", [message(Role.USER, f"m{i}") for i in range(3)])
    first = await repo.first(session.id)
    assert first is not None and first.message.content == "m0"
    await repo.tail(session.id, 2, "cl")
    on_disk = await ConversationRepo(db).first(session.id)  # nothing cached: read
    assert on_disk is not None and on_disk.id == first.id
    assert await repo.first("missing") is None


@contextlib.contextmanager
def no_statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fails the test if a read inside the block runs a statement."""

    def no_query(*args: object) -> None:
        raise AssertionError("read from the database")

    with monkeypatch.context() as patch:
        patch.setattr(SqliteConnection, "execute_fetchall", no_query)
        yield


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
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions, repo = SessionRepo(db), ConversationRepo(db)
    summaries, catalog, memories = SummaryRepo(db), CatalogRepo(db), MemoryRepo(db)
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


@pytest.mark.sqlite_only
async def test_a_window_wider_than_the_cache_leaves_the_cached_rows_in_place(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tail_cache, "TAIL_CACHE_ROWS", 5)
    repo = ConversationRepo(db)
    session = await SessionRepo(db).create("alice")
    await repo.append(session.id, "alice", [message(Role.USER, f"m{i}", cl=i) for i in range(8)])
    cached = await repo.tail(session.id, 5, "cl")
    for _ in range(2):
        wide = await repo.tail(session.id, 7, "cl")  # more than is cached: read
        assert wide == await from_disk(db, session.id, 7, "cl")
        # The cached rows are the same objects: not rebuilt nor trimmed again.
        with no_statements(monkeypatch):
            again = await repo.tail(session.id, 5, "cl")
        assert all(a is b for a, b in zip(again, cached, strict=True))
    # A session first read through a wide window keeps its newest rows.
    repo = ConversationRepo(db)
    assert len(await repo.tail(session.id, 100, "cl")) == 8
    with no_statements(monkeypatch):
        newest = await repo.tail(session.id, 5, "cl")
    assert [r.message.content for r in newest] == [f"m{i}" for i in range(3, 8)]


async def test_counts_saved_reach_rows_cached_with_every_count(db: Database) -> None:
    repo = ConversationRepo(db)
    session = await SessionRepo(db).create("alice")  # cached with every count
    [stored] = await repo.append(session.id, "alice", [message(Role.USER, "q", cl=1)])
    await repo.save_tokens([(stored.id, "new", 4)], session.id)
    await assert_tail_matches_disk(db, repo, session.id, "new")


async def test_counts_of_messages_deleted_meanwhile_are_left_out(db: Database) -> None:
    sessions, repo = SessionRepo(db), ConversationRepo(db)
    session = await sessions.create("alice")
    other = await sessions.create("alice")
    [gone] = await repo.append(session.id, "alice", [message(Role.USER, "q")])
    [kept] = await repo.append(other.id, "alice", [message(Role.USER, "q")])
    await sessions.delete(session.id)  # after its rows were read for counting
    await repo.save_tokens([(gone.id, "new", 3)], session.id)
    await repo.save_tokens([(kept.id, "new", 4)], other.id)
    assert await repo.tail(session.id, 5, "new") == []
    assert [r.tokens for r in await repo.tail(other.id, 5, "new")] == [{"new": 4}]
    await assert_tail_matches_disk(db, repo, other.id, "new")


async def test_on_postgresql_every_read_sees_another_servers_writes(db: Database) -> None:
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
    memories, other_memories = MemoryRepo(db), MemoryRepo(db)
    assert await other_memories.search("alice", "coffee") == []
    await memories.add("alice", "Alice drinks coffee")
    assert len(await other_memories.search("alice", "coffee")) == 1

"""The core store on both engines: migrations, sessions, conversation, summaries, catalog."""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import sqlite3
from pathlib import Path

import pytest
from contextd.core.errors import SessionNotFound
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.store.catalog import CatalogRepo
from contextd.store.conversation import TAIL_SQL, ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.engine.sqlite import SqliteDatabase
from contextd.store.models import NewMessage, Session, Skill
from contextd.store.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo


@pytest.fixture
def sessions(db: Database) -> SessionRepo:
    return SessionRepo(db)


@pytest.fixture
def conversation(db: Database) -> ConversationRepo:
    return ConversationRepo(db)


def user(text: str, **tokens: int) -> NewMessage:
    return NewMessage(ChatMessage(Role.USER, text), tokens=dict(tokens))


def assistant(text: str, **tokens: int) -> NewMessage:
    return NewMessage(ChatMessage(Role.ASSISTANT, text), tokens=dict(tokens))


async def count(db: Database, sql: str, *params: object) -> int:
    rows = list(await db.reader.execute_fetchall(sql, params))
    return int(rows[0][0])


# --- migrations -----------------------------------------------------------------------------


async def test_migrations_are_recorded_and_idempotent_on_reopen(tmp_path: Path) -> None:
    path = tmp_path / "contextd.sqlite3"
    db = await SqliteDatabase.open(path)
    rows = list(await db.reader.execute_fetchall("SELECT * FROM schema_migrations"))
    first = [tuple(r) for r in rows]
    versions = [r[0] for r in first]
    assert versions == list(range(1, len(versions) + 1))
    assert (first[0][0], first[0][1]) == (1, "core")
    assert await db.schema_version() == len(versions)
    tables = {
        r[0]
        for r in await db.reader.execute_fetchall(
            "SELECT name FROM sqlite_schema WHERE type='table'"
        )
    }
    assert {
        "sessions",
        "conversation",
        "message_tokens",
        "compression_summaries",
        "session_summaries",
        "prompt_templates",
        "skills",
    } <= tables
    session = await SessionRepo(db).create("alice")
    await db.close()

    again = await SqliteDatabase.open(path)  # nothing re-applied, data kept
    try:
        rows = list(await again.reader.execute_fetchall("SELECT * FROM schema_migrations"))
        assert [tuple(r) for r in rows] == first
        assert await SessionRepo(again).get(session.id) == session
    finally:
        await again.close()


async def test_a_database_with_a_newer_schema_refuses_to_open(tmp_path: Path) -> None:
    path = tmp_path / "contextd.sqlite3"
    db = await SqliteDatabase.open(path)
    known = await db.schema_version()
    await db.close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'future', 0)",
            (known + 1,),
        )
    conn.close()
    with pytest.raises(RuntimeError, match=rf"schema version {known + 1}, newer than"):
        await SqliteDatabase.open(path)
    gc.collect()  # Database.open leaves its two connections to the collector on failure


# --- sessions -------------------------------------------------------------------------------


async def test_create_and_get_a_session(sessions: SessionRepo) -> None:
    created = await sessions.create(
        "alice", scenario="excel", host="Excel", title="Q3 numbers", metadata={"sheet": "P&L"}
    )
    assert len(created.id) == 32 and int(created.id, 16) >= 0
    assert created.message_count == 0
    assert created.created_at == created.updated_at > 0
    assert await sessions.get(created.id) == created
    assert await sessions.get("nope") is None
    with pytest.raises(ValueError, match="user_id"):
        await sessions.create("")


async def test_get_does_not_filter_by_user(sessions: SessionRepo) -> None:
    bobs = await sessions.create("bob")
    found = await sessions.get(bobs.id)  # the app layer compares found.user_id with the caller
    assert found is not None and found.user_id == "bob"


async def make_sessions(sessions: SessionRepo, user_id: str, n: int) -> list[Session]:
    made = [await sessions.create(user_id, title=f"s{i}") for i in range(n)]
    return made[::-1]  # newest first


async def all_pages(sessions: SessionRepo, user_id: str, size: int) -> list[list[str]]:
    pages, token = [], ""
    while True:
        page, token = await sessions.list_sessions(user_id, size, token)
        pages.append([s.id for s in page])
        if not token:
            return pages


async def test_list_sessions_newest_first_in_pages(sessions: SessionRepo) -> None:
    newest_first = [s.id for s in await make_sessions(sessions, "alice", 7)]
    await sessions.create("bob")
    pages = await all_pages(sessions, "alice", 3)
    assert pages == [newest_first[0:3], newest_first[3:6], newest_first[6:7]]
    # A page size dividing the count exactly: the last full page has no next token.
    assert await all_pages(sessions, "alice", 7) == [newest_first]
    assert await all_pages(sessions, "nobody", 3) == [[]]


async def test_list_sessions_ties_on_updated_at_are_ordered_by_id(db: Database) -> None:
    repo = SessionRepo(db)
    made = [await repo.create("alice") for _ in range(5)]
    async with db.transaction() as conn:
        await conn.execute("UPDATE sessions SET updated_at = 1000.0")
    expected = sorted((s.id for s in made), reverse=True)
    assert [i for page in await all_pages(repo, "alice", 2) for i in page] == expected


async def test_list_sessions_is_stable_under_inserts(sessions: SessionRepo) -> None:
    newest_first = [s.id for s in await make_sessions(sessions, "alice", 6)]
    page, token = await sessions.list_sessions("alice", 2)
    seen = [s.id for s in page]
    for _ in range(3):  # newer sessions sort before the token's position
        await sessions.create("alice")
    while token:
        page, token = await sessions.list_sessions("alice", 2, token)
        seen += [s.id for s in page]
    assert seen == newest_first


async def test_a_session_with_a_new_message_moves_to_the_front(
    sessions: SessionRepo, conversation: ConversationRepo
) -> None:
    oldest = (await make_sessions(sessions, "alice", 3))[-1]
    await conversation.append(oldest.id, "alice", [user("hello")])
    page, _ = await sessions.list_sessions("alice", 10)
    assert page[0].id == oldest.id
    assert page[0].message_count == 1
    assert page[0].updated_at > oldest.updated_at


async def test_list_sessions_page_size_bounds(sessions: SessionRepo) -> None:
    await make_sessions(sessions, "alice", DEFAULT_PAGE_SIZE + 1)
    page, token = await sessions.list_sessions("alice", 0)  # 0 means the default
    assert len(page) == DEFAULT_PAGE_SIZE and token
    page, token = await sessions.list_sessions("alice", MAX_PAGE_SIZE + 5)  # clamped to the maximum
    assert len(page) == DEFAULT_PAGE_SIZE + 1 and token == ""
    page, _ = await sessions.list_sessions("alice", 1)
    assert len(page) == 1
    with pytest.raises(ValueError, match="page_size must be >= 0"):
        await sessions.list_sessions("alice", -1)


async def test_bad_page_tokens_are_refused_clearly(
    sessions: SessionRepo, conversation: ConversationRepo
) -> None:
    await make_sessions(sessions, "alice", 3)
    await make_sessions(sessions, "bob", 3)
    _, alice_token = await sessions.list_sessions("alice", 1)
    session = await sessions.create("carol")
    await conversation.append(session.id, "carol", [user("a"), user("b")])
    _, messages_token = await conversation.list_messages(session.id, 1)
    assert alice_token and messages_token

    def encoded(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()

    garbage = ["%%%", "bm90IGpzb24", encoded({"a": 1}), encoded(["sessions"]), "é"]
    for token in garbage:
        with pytest.raises(ValueError, match="invalid page token"):
            await sessions.list_sessions("alice", 1, token)
    with pytest.raises(ValueError, match="belongs to another sessions listing"):
        await sessions.list_sessions("bob", 1, alice_token)
    with pytest.raises(ValueError, match="not a token of a sessions listing"):
        await sessions.list_sessions("alice", 1, messages_token)
    with pytest.raises(ValueError, match="not a token of a messages listing"):
        await conversation.list_messages(session.id, 1, alice_token)
    # Right kind and listing, but a position of the wrong shape.
    forged = json.loads(base64.urlsafe_b64decode(alice_token + "=="))
    forged[2] = "yesterday"
    with pytest.raises(ValueError, match="malformed position"):
        await sessions.list_sessions("alice", 1, encoded(forged).rstrip("="))


async def test_delete_cascades_to_messages_tokens_and_summaries(db: Database) -> None:
    sessions, conversation, summaries = SessionRepo(db), ConversationRepo(db), SummaryRepo(db)
    doomed = await sessions.create("alice")
    kept = await sessions.create("alice")
    for s in (doomed, kept):
        stored = await conversation.append(s.id, "alice", [user("q", x=1), assistant("a", x=2)])
        await summaries.add_compression(s.id, [stored[0].id], stored[0].id, "sum")
        await summaries.upsert_session_summary(s.id, "alice", "about q", by_host=True)
    assert await sessions.delete(doomed.id) is True
    assert await sessions.get(doomed.id) is None
    for table, column in (
        ("conversation", "session_id"),
        ("compression_summaries", "session_id"),
        ("session_summaries", "session_id"),
    ):
        assert await count(db, f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", doomed.id) == 0
        assert await count(db, f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", kept.id) > 0
    assert await count(db, "SELECT COUNT(*) FROM message_tokens") == 2  # kept's two messages
    assert await sessions.delete(doomed.id) is False
    assert (await sessions.get(kept.id)) is not None


# --- conversation ---------------------------------------------------------------------------


async def test_append_assigns_contiguous_seqs_and_ids(
    sessions: SessionRepo, conversation: ConversationRepo
) -> None:
    session = await sessions.create("alice")
    call = ToolCall("call_1", "lookup", '{"q": "咖啡"}')
    first = await conversation.append(
        session.id,
        "alice",
        [
            user("What is in cell B2?", cl100k_base=9, estimate=5),
            NewMessage(ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)), turn_index=0),
            NewMessage(ChatMessage(Role.TOOL, "42", tool_call_id="call_1"), turn_index=0),
        ],
    )
    second = await conversation.append(
        session.id, "alice", [NewMessage(ChatMessage(Role.ASSISTANT, "42."), 1, "partial")]
    )
    stored = first + second
    assert [m.seq for m in stored] == [0, 1, 2, 3]
    assert [m.message.id for m in stored] == [str(m.id) for m in stored]
    assert len({m.id for m in stored}) == 4
    assert stored[0].tokens == {"cl100k_base": 9, "estimate": 5}
    assert stored[1].message.tool_calls == (call,)
    assert stored[2].message.tool_call_id == "call_1"
    assert (stored[3].turn_index, stored[3].status) == (1, "partial")
    for m in stored:  # what append returns is what a read returns
        assert await conversation.get(m.id) == m
    after = await sessions.get(session.id)
    assert after is not None
    assert after.message_count == 4
    assert after.updated_at == stored[3].created_at >= session.updated_at


async def test_append_replaces_caller_ids_with_row_ids(
    sessions: SessionRepo, conversation: ConversationRepo
) -> None:
    session = await sessions.create("alice")
    [stored] = await conversation.append(
        session.id, "alice", [NewMessage(ChatMessage(Role.USER, "hi", id="client-7"))]
    )
    assert stored.message.id == str(stored.id)


async def test_append_many_messages_in_one_call(
    sessions: SessionRepo, conversation: ConversationRepo
) -> None:
    session = await sessions.create("alice")
    await conversation.append(session.id, "alice", [user("before")])
    batch = [user(f"m{i}", estimate=i) for i in range(1234)]  # more than one INSERT statement
    stored = await conversation.append(session.id, "alice", batch)
    assert [m.seq for m in stored] == list(range(1, 1235))
    assert [m.message.content for m in stored] == [f"m{i}" for i in range(1234)]
    tail = await conversation.tail(session.id, 3, "estimate")
    assert [(m.message.content, m.tokens) for m in tail] == [
        ("m1231", {"estimate": 1231}),
        ("m1232", {"estimate": 1232}),
        ("m1233", {"estimate": 1233}),
    ]
    again = await sessions.get(session.id)
    assert again is not None and again.message_count == 1235


async def test_append_refuses_missing_or_foreign_sessions_and_system_messages(
    db: Database, sessions: SessionRepo, conversation: ConversationRepo
) -> None:
    session = await sessions.create("alice")
    assert await conversation.append(session.id, "alice", []) == []
    with pytest.raises(SessionNotFound, match="no session with id"):
        await conversation.append("missing", "alice", [user("x", t=1)])
    with pytest.raises(SessionNotFound):
        await conversation.append(session.id, "mallory", [user("x", t=1)])
    with pytest.raises(ValueError, match="system message cannot be stored"):
        await conversation.append(
            session.id, "alice", [user("ok"), NewMessage(ChatMessage(Role.SYSTEM, "be nice"))]
        )
    assert await count(db, "SELECT COUNT(*) FROM conversation") == 0
    assert await count(db, "SELECT COUNT(*) FROM message_tokens") == 0
    unchanged = await sessions.get(session.id)
    assert unchanged == session


async def test_list_messages_oldest_first_in_pages(
    sessions: SessionRepo, conversation: ConversationRepo
) -> None:
    session = await sessions.create("alice")
    other = await sessions.create("alice")
    await conversation.append(other.id, "alice", [user("elsewhere")])
    stored = await conversation.append(session.id, "alice", [user(f"m{i}", t=i) for i in range(5)])
    seen, token, pages = [], "", 0
    while True:
        page, token = await conversation.list_messages(session.id, 2, token)
        seen += page
        pages += 1
        if not token:
            break
    assert seen == stored and pages == 3
    page, token = await conversation.list_messages(session.id, 5)
    assert page == stored and token == ""
    assert await conversation.list_messages("missing", 5) == ([], "")
    with pytest.raises(ValueError, match="page_size"):
        await conversation.list_messages(session.id, -3)


async def test_tail_returns_the_newest_messages_with_one_tokenizer(
    sessions: SessionRepo, conversation: ConversationRepo
) -> None:
    session = await sessions.create("alice")
    await conversation.append(
        session.id,
        "alice",
        [user("u0", cl=10, est=3), assistant("a0", cl=20), user("u1", est=4), assistant("a1")],
    )
    tail = await conversation.tail(session.id, 3, "cl")
    assert [m.message.content for m in tail] == ["a0", "u1", "a1"]
    assert [m.tokens for m in tail] == [{"cl": 20}, {}, {}]
    everything = await conversation.tail(session.id, 100, "est")
    assert [m.message.content for m in everything] == ["u0", "a0", "u1", "a1"]
    assert [m.tokens for m in everything] == [{"est": 3}, {}, {"est": 4}, {}]
    assert await conversation.tail(session.id, 0, "cl") == []
    assert await conversation.tail("missing", 5, "cl") == []


@pytest.mark.sqlite_only
async def test_tail_query_plan_uses_the_session_seq_index(
    db: Database, sessions: SessionRepo, conversation: ConversationRepo
) -> None:
    session = await sessions.create("alice")
    await conversation.append(session.id, "alice", [user(f"m{i}", cl=1) for i in range(50)])
    async with db.transaction() as conn:
        await conn.execute("ANALYZE")  # the plan must hold with statistics too
    rows = await db.reader.execute_fetchall(
        "EXPLAIN QUERY PLAN " + TAIL_SQL, ("cl", session.id, "default", 10)
    )
    plan = [str(r[3]) for r in rows]
    assert any("USING INDEX conversation_session_seq (session_id=?)" in p for p in plan), plan
    assert any("SEARCH t USING PRIMARY KEY (message_id=? AND tokenizer=?)" in p for p in plan)
    assert not any("TEMP B-TREE" in p or p.startswith("SCAN") for p in plan), plan


def vm_steps(path: Path, session_id: str, limit: int) -> int:
    """SQLite virtual-machine instructions one tail query executes."""
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn = sqlite3.connect(path)
    try:
        conn.set_progress_handler(tick, 1)
        rows = conn.execute(TAIL_SQL, ("cl", session_id, "default", limit)).fetchall()
        assert len(rows) == limit
    finally:
        conn.close()
    return steps


@pytest.mark.sqlite_only
async def test_tail_cost_follows_the_limit_not_the_session_length(
    db: Database, sessions: SessionRepo, conversation: ConversationRepo
) -> None:
    short = await sessions.create("alice")
    long = await sessions.create("alice")
    await conversation.append(short.id, "alice", [user(f"s{i}", cl=2) for i in range(20)])
    await conversation.append(long.id, "alice", [user(f"l{i}", cl=2) for i in range(5000)])
    short_steps = await asyncio.to_thread(vm_steps, db.path, short.id, 10)
    long_steps = await asyncio.to_thread(vm_steps, db.path, long.id, 10)
    assert long_steps <= short_steps * 1.2, (short_steps, long_steps)


async def test_an_automatic_session_summary_does_not_replace_the_hosts(
    db: Database, sessions: SessionRepo
) -> None:
    summaries = SummaryRepo(db)
    session = await sessions.create("alice")
    other = await sessions.create("alice")
    assert await summaries.upsert_session_summary(session.id, "alice", "auto 1", by_host=False)
    assert await summaries.upsert_session_summary(session.id, "alice", "auto 2", by_host=False)
    assert await summaries.upsert_session_summary(session.id, "alice", "host", by_host=True)
    assert not await summaries.upsert_session_summary(session.id, "alice", "auto 3", by_host=False)
    assert await summaries.upsert_session_summary(session.id, "alice", "host 2", by_host=True)
    [recent] = await summaries.recent_session_summaries("alice", other.id)
    assert recent.summary == "host 2"
    for by_host in (False, True):
        with pytest.raises(SessionNotFound):
            await summaries.upsert_session_summary(session.id, "bob", "x", by_host=by_host)


async def test_save_tokens_stores_each_count_once(
    sessions: SessionRepo, conversation: ConversationRepo
) -> None:
    session = await sessions.create("alice")
    [a, b] = await conversation.append(session.id, "alice", [user("a", cl=7), user("b")])
    await conversation.save_tokens(
        [(a.id, "cl", 999), (a.id, "est", 2), (b.id, "cl", 3)], session.id
    )
    await conversation.save_tokens([(b.id, "cl", 4), (b.id, "cl", 5)], session.id)
    await conversation.save_tokens([], session.id)
    got_a, got_b = await conversation.get(a.id), await conversation.get(b.id)
    assert got_a is not None and got_a.tokens == {"cl": 7, "est": 2}  # 7 kept, not 999
    assert got_b is not None and got_b.tokens == {"cl": 3}


async def test_collected_flag_round_trip(
    sessions: SessionRepo, conversation: ConversationRepo
) -> None:
    session = await sessions.create("alice")
    [q, answer] = await conversation.append(
        session.id, "alice", [user("q"), assistant("the answer", cl=3)]
    )
    assert answer.is_collected is False
    collected = await conversation.set_collected(answer.id, True)
    assert collected is not None
    assert collected.is_collected is True
    assert collected.tokens == {"cl": 3} and collected.message.content == "the answer"
    assert collected.message.id == str(answer.id)
    assert await conversation.get(answer.id) == collected
    again = await conversation.set_collected(answer.id, True)  # idempotent
    assert again == collected
    cleared = await conversation.set_collected(answer.id, False)
    assert cleared is not None and cleared.is_collected is False
    assert await conversation.get(answer.id) == cleared
    assert (await conversation.get(q.id)) == q
    assert await conversation.set_collected(10_000, True) is None
    assert await conversation.get(10_000) is None


# --- summaries ------------------------------------------------------------------------------


async def test_compression_summaries_keep_one_active(db: Database, sessions: SessionRepo) -> None:
    summaries = SummaryRepo(db)
    session = await sessions.create("alice")
    assert await summaries.active_compression(session.id) is None
    first = await summaries.add_compression(session.id, [1, 2, 3], 1, "talked about cells")
    assert (first.message_ids, first.start_message_id, first.active) == ((1, 2, 3), 1, True)
    assert await summaries.active_compression(session.id) == first
    second = await summaries.add_compression(session.id, [1, 2, 3, 4, 5], 1, "cells, charts")
    assert await summaries.active_compression(session.id) == second
    assert second.id > first.id and second.created_at >= first.created_at
    rows = await db.reader.execute_fetchall(
        "SELECT id, active FROM compression_summaries ORDER BY id"
    )
    assert [tuple(r) for r in rows] == [(first.id, 0), (second.id, 1)]
    with pytest.raises(SessionNotFound):
        await summaries.add_compression("missing", [1], 1, "x")
    assert await summaries.active_compression(session.id) == second  # rolled back


async def test_session_summaries_of_recent_other_sessions(
    db: Database, sessions: SessionRepo
) -> None:
    summaries = SummaryRepo(db)
    current = await sessions.create("alice", title="now")
    older = await sessions.create("alice", title="budget")
    newer = await sessions.create("alice", title="charts")
    empty = await sessions.create("alice", title="nothing yet")
    bobs = await sessions.create("bob", title="bob's")
    await summaries.upsert_session_summary(older.id, "alice", "v1", by_host=True)
    await summaries.upsert_session_summary(newer.id, "alice", "made a chart", by_host=True)
    await summaries.upsert_session_summary(current.id, "alice", "current one", by_host=True)
    await summaries.upsert_session_summary(bobs.id, "bob", "bob's summary", by_host=True)
    await summaries.upsert_session_summary(empty.id, "alice", "", by_host=True)
    await summaries.upsert_session_summary(
        older.id, "alice", "planned the budget", by_host=True
    )  # now newest

    recent = await summaries.recent_session_summaries("alice", current.id, 5)
    assert [(s.session_id, s.summary, s.title) for s in recent] == [
        (older.id, "planned the budget", "budget"),
        (newer.id, "made a chart", "charts"),
    ]
    assert recent[0].updated_at >= recent[1].updated_at
    assert all(s.user_id == "alice" for s in recent)
    assert [s.session_id for s in await summaries.recent_session_summaries("alice", "", 1)] == [
        older.id
    ]
    assert await summaries.recent_session_summaries("alice", current.id, 0) == []
    with pytest.raises(SessionNotFound):
        await summaries.upsert_session_summary(bobs.id, "alice", "not mine", by_host=True)
    with pytest.raises(SessionNotFound):
        await summaries.upsert_session_summary("missing", "alice", "x", by_host=True)
    bob_recent = await summaries.recent_session_summaries("bob", "", 5)
    assert [s.summary for s in bob_recent] == ["bob's summary"]


# --- catalog --------------------------------------------------------------------------------


async def test_prompt_templates_are_versioned_on_change(db: Database) -> None:
    catalog = CatalogRepo(db)
    created = await catalog.upsert_template("excel", "You help with {{host}} sheets.")
    assert (created.version, created.enabled) == (1, True)
    same = await catalog.upsert_template("excel", "You help with {{host}} sheets.")
    assert same == created  # nothing changed: same version, same time
    changed = await catalog.upsert_template("excel", "You help with Excel.")
    assert changed.version == 2 and changed.updated_at >= created.updated_at
    disabled = await catalog.upsert_template("excel", "You help with Excel.", enabled=False)
    assert (disabled.version, disabled.enabled) == (3, False)
    await catalog.upsert_template("word", "You help with documents.")
    assert await catalog.get_template("excel") == disabled
    assert await catalog.get_template("ppt") is None
    assert [t.scenario for t in await catalog.list_templates()] == ["excel", "word"]
    assert await catalog.delete_template("excel") is True
    assert await catalog.delete_template("excel") is False
    assert [t.scenario for t in await catalog.list_templates()] == ["word"]
    recreated = await catalog.upsert_template("excel", "fresh")
    assert recreated.version == 1


async def test_skills_upsert_filter_and_delete(db: Database) -> None:
    catalog = CatalogRepo(db)
    chart = await catalog.upsert_skill(Skill("chart", "Make charts", "Use a chart.", ["excel"]))
    assert chart.updated_at > 0 and chart.apps == ("excel",)
    await catalog.upsert_skill(Skill("everywhere", "Polite", "Be polite.", []))
    await catalog.upsert_skill(Skill("redline", "Track changes", "Redline.", ["word", "wps"]))
    await catalog.upsert_skill(Skill("old", "Retired", "x", ["excel"], enabled=False))

    def names(skills: list[Skill]) -> list[str]:
        return [s.name for s in skills]

    assert names(await catalog.list_skills()) == ["chart", "everywhere", "old", "redline"]
    assert names(await catalog.list_skills("excel")) == ["chart", "everywhere", "old"]
    assert names(await catalog.list_skills("Excel", enabled_only=True)) == ["chart", "everywhere"]
    assert names(await catalog.list_skills("wps")) == ["everywhere", "redline"]
    assert names(await catalog.list_skills("outlook")) == ["everywhere"]
    assert names(await catalog.list_skills(enabled_only=True)) == [
        "chart",
        "everywhere",
        "redline",
    ]

    unchanged = await catalog.upsert_skill(Skill("chart", "Make charts", "Use a chart.", ["excel"]))
    assert unchanged == chart
    changed = await catalog.upsert_skill(Skill("chart", "Make charts", "v2", ["excel", "wps"]))
    assert changed.prompt == "v2" and changed.apps == ("excel", "wps")
    assert names(await catalog.list_skills("wps")) == ["chart", "everywhere", "redline"]

    assert await catalog.delete_skill("old") is True
    assert await catalog.delete_skill("old") is False
    assert "old" not in names(await catalog.list_skills())
    with pytest.raises(ValueError, match="name"):
        await catalog.upsert_skill(Skill(""))

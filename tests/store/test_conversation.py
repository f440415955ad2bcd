"""ConversationRepo on both engines: appends number a session's messages in order, pages and
the rolling window read them back with their token counts, and flags and a turn's usage
are stored with them."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from contextd.core.errors import SessionNotFound
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.store.conversation import ConversationRepo
from contextd.store.conversation_reads import TAIL_SQL
from contextd.store.engine.database import Database
from contextd.store.models import AnswerRecord, NewMessage, UsageTotals
from contextd.store.sessions import SessionRepo

from tests.support.store_helpers import assistant, count, message, user


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


async def test_writers_of_one_session_at_once_keep_its_messages_in_order(
    db: Database, sessions: SessionRepo
) -> None:
    """Servers writing one session at once (each its own repositories): every message is
    stored once, seqs run on without a gap, and each write's messages stay together. On
    PostgreSQL a write is one statement that reads the next seq in its snapshot; one that
    read it before another's commit conflicts, writes nothing, and is written again in
    order."""
    session = await sessions.create("alice")
    servers = [ConversationRepo(db) for _ in range(4)]

    async def write(k: int) -> None:
        pair = [user(f"q{k}", t=1), assistant(f"a{k}", t=1)]
        await servers[k % len(servers)].append(session.id, "alice", pair)

    await asyncio.gather(*(write(k) for k in range(24)))
    rows, _ = await ConversationRepo(db).list_messages(session.id, 100)
    assert [r.seq for r in rows] == list(range(48))
    contents = [r.message.content for r in rows]
    assert sorted(contents) == sorted([f"q{k}" for k in range(24)] + [f"a{k}" for k in range(24)])
    for first, second in zip(contents[::2], contents[1::2], strict=True):
        assert first[0] == "q" and second == "a" + first[1:]
    assert await count(db, "SELECT message_count FROM sessions") == 48


async def test_an_answer_record_is_kept_with_the_answer_and_goes_with_it(
    sessions: SessionRepo, conversation: ConversationRepo, db: Database
) -> None:
    session = await sessions.create("alice")
    usage = UsageTotals(120, 30, 110, 20, 5, True)
    record = AnswerRecord("claude-x", usage, '{"instructions": "Be terse."}')
    [question] = await conversation.append(session.id, "alice", [user("Tea?")])
    stored, _ = await conversation.append_with_usage(
        session.id, "alice", [assistant("Green.")], usage, answer=record
    )
    [answer] = stored
    page, _ = await conversation.list_messages(session.id)
    assert [m.answer for m in page] == [None, record]
    # Kept with the last message of the answer's append only, and only read by pages.
    assert (await conversation.get(answer.id)) == replace(page[1], answer=None)
    assert page[0] == question
    # A blank answer stores no message: nothing to keep a record with.
    assert await conversation.append_with_usage(session.id, "alice", [], usage, answer=record) == (
        [],
        UsageTotals(240, 60, 220, 40, 10, True),
    )
    assert await count(db, "SELECT count(*) FROM answer_records") == 1
    assert await sessions.delete(session.id)
    assert await count(db, "SELECT count(*) FROM answer_records") == 0

"""SummaryRepo on both engines: one active compression summary per session, written only over
the one it was made from; session summaries (the host's kept, a later turn's kept); the
user's other sessions' summaries; kept reads that follow every write; summaries stay in
their tenant."""

from __future__ import annotations

import pytest
from contextd.core.errors import SessionNotFound
from contextd.core.messages import ChatMessage, Role
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.models import NewMessage, Session, UsageTotals
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo

from tests.support.store_helpers import message

A, B = "acme", "globex"


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


@pytest.fixture
async def session(db: Database) -> Session:
    return await SessionRepo(db).create("alice", tenant_id="acme")


async def test_a_compression_follows_the_summary_it_was_made_from(
    db: Database, session: Session
) -> None:
    [a, b] = await ConversationRepo(db).append(
        session.id,
        "alice",
        [NewMessage(ChatMessage(Role.USER, t), turn_index=1) for t in ("one", "two")],
        tenant_id="acme",
    )
    summaries = SummaryRepo(db)
    first = await summaries.add_compression_after(session.id, 0, [a.id], a.id, "one")
    assert first is not None
    # Made from none, but one is active now: written by another process meanwhile.
    assert await summaries.add_compression_after(session.id, 0, [a.id, b.id], a.id, "x") is None
    later = await summaries.add_compression_after(session.id, first.id, [a.id, b.id], a.id, "12")
    assert later is not None and later.active
    active = await summaries.active_compression(session.id)
    assert active is not None and active.id == later.id


async def test_a_summary_made_after_an_earlier_turn_does_not_replace_a_later_ones(
    db: Database, session: Session
) -> None:
    summaries = SummaryRepo(db)
    await summaries.upsert_session_summary(
        session.id, "alice", "after turn 3", False, tenant_id="acme", turn_index=3
    )
    # Another process finishing turn 2's work late.
    assert not await summaries.upsert_session_summary(
        session.id, "alice", "after turn 2", False, tenant_id="acme", turn_index=2
    )
    assert await summaries.upsert_session_summary(
        session.id, "alice", "after turn 4", False, tenant_id="acme", turn_index=4
    )
    [recent] = await summaries.recent_session_summaries("alice", tenant_id="acme", limit=5)
    assert recent.summary == "after turn 4"


async def test_session_summaries_stay_in_their_tenant(db: Database) -> None:
    sessions, summaries = SessionRepo(db), SummaryRepo(db)
    mine = await sessions.create("bob", tenant_id=A)
    theirs = await sessions.create("bob", tenant_id=B)
    assert await summaries.upsert_session_summary(mine.id, "bob", "A talk", True, tenant_id=A)
    with pytest.raises(SessionNotFound):
        await summaries.upsert_session_summary(mine.id, "bob", "B's words", True, tenant_id=B)
    assert await summaries.recent_session_summaries("bob", theirs.id, tenant_id=B) == []
    recent = await summaries.recent_session_summaries("bob", theirs.id, tenant_id=A)
    assert [s.summary for s in recent] == ["A talk"]
    assert await summaries.recent_session_summaries("bob", tenant_id=B) == []


async def test_a_kept_compression_summary_moves_on_with_a_write_of_messages_alone(
    db: Database, sessions: SessionRepo
) -> None:
    """Where kept reads name the session's version (PostgreSQL), the active compression
    summary kept at one version answers at the next when that version came from a write
    of the session's messages, which leaves the summaries alone: no read after a turn's
    own writes. A write of a summary moves the version on too, and is read again."""
    if not db.shared_between_processes:
        pytest.skip("SQLite has a single writer: its kept reads need no version")
    summaries, conversation = SummaryRepo(db), ConversationRepo(db)
    session = await sessions.create("alice")
    [row] = await conversation.append(session.id, "alice", [message(Role.USER, "q", cl=1)])
    await summaries.add_compression(session.id, [row.id], row.id, "folded")
    version = await conversation.current_version(session.id)
    assert version is not None
    kept = await summaries.active_compression(session.id, version=version)
    assert kept is not None and kept.summary == "folded"
    await conversation.append_with_usage(
        session.id, "alice", [message(Role.ASSISTANT, "a", cl=1)], UsageTotals(1, 1, 1)
    )
    statements: list[str] = []
    db.time_statements(lambda sql, _: statements.append(sql))
    assert await summaries.active_compression(session.id, version=version + 1) == kept
    assert statements == []
    # A summary written by another server (its own repositories) is read at its version.
    await SummaryRepo(db).add_compression(session.id, [row.id], row.id, "folded again")
    newer = await conversation.current_version(session.id)
    assert newer == version + 2
    statements.clear()
    active = await summaries.active_compression(session.id, version=newer)
    assert active is not None and active.summary == "folded again"
    assert len(statements) == 1

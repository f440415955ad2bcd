"""A session's partial_answers row as a lease between processes sharing a database (two
repositories stand for two processes), on both engines; the database's transaction-scoped
lock; a compression summary written only over the one it was made from."""

from __future__ import annotations

import asyncio
import time

import pytest
from contextd.core.errors import SessionNotFound
from contextd.core.messages import ChatMessage, Role
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.models import NewMessage, Session
from contextd.store.partial_answers import Busy, PartialAnswer, PartialAnswerRepo
from contextd.store.sessions import SessionRepo, UsageTotals
from contextd.store.summaries import SummaryRepo

LEASE = 0.3


@pytest.fixture
async def session(db: Database) -> Session:
    return await SessionRepo(db).create("alice", tenant_id="acme")


async def start_turn(db: Database, partials: PartialAnswerRepo, session: Session) -> None:
    """Turn 1's input stored, opening the row ``partials`` claimed."""
    await ConversationRepo(db).append(
        session.id,
        "alice",
        [NewMessage(ChatMessage(Role.USER, "hi"), turn_index=1)],
        tenant_id="acme",
        also=partials.opening("acme", session.id, 1, "cl100k_base"),
    )


async def test_a_live_claim_keeps_other_processes_out(db: Database, session: Session) -> None:
    mine, theirs = PartialAnswerRepo(db, LEASE), PartialAnswerRepo(db, LEASE)
    assert await mine.claim("acme", session.id) is None
    [row] = await mine.left_behind()
    assert (row.turn_index, row.owner) == (0, mine.owner)
    busy = await theirs.claim("acme", session.id)
    assert isinstance(busy, Busy) and busy.until > time.time()

    await start_turn(db, mine, session)
    await asyncio.sleep(LEASE * 0.7)
    assert await mine.renew(session.id)
    await asyncio.sleep(LEASE * 0.7)  # past the first lease, within the renewed one
    assert isinstance(await theirs.claim("acme", session.id), Busy)
    assert not await theirs.renew(session.id)


async def test_an_expired_claim_is_taken_over_once(db: Database, session: Session) -> None:
    dead, first, second = (PartialAnswerRepo(db, LEASE) for _ in range(3))
    assert await dead.claim("acme", session.id) is None
    await start_turn(db, dead, session)
    await dead.save(session.id, 0, "Once upon", UsageTotals(0, 0, 40))
    await asyncio.sleep(LEASE + 0.1)

    taken = await first.claim("acme", session.id)
    assert isinstance(taken, PartialAnswer)
    assert (taken.owner, taken.turn_index, taken.text) == (first.owner, 1, "Once upon")
    # The row is the taker's now: neither its dead owner nor a third process gets it.
    assert isinstance(await second.claim("acme", session.id), Busy)
    await dead.save(session.id, 0, "Once upon a time", UsageTotals(0, 0, 40))
    assert not await dead.renew(session.id)
    [row] = await first.left_behind()
    assert row.text == "Once upon"


async def test_a_claim_without_a_turn_is_released(db: Database, session: Session) -> None:
    mine, theirs = PartialAnswerRepo(db, LEASE), PartialAnswerRepo(db, LEASE)
    assert await mine.claim("acme", session.id) is None
    await theirs.release(session.id)  # another process's claim stays
    assert len(await mine.left_behind()) == 1
    await mine.release(session.id)
    assert await mine.left_behind() == []
    assert await theirs.claim("acme", session.id) is None


async def test_a_started_turn_is_not_released(db: Database, session: Session) -> None:
    mine = PartialAnswerRepo(db, LEASE)
    assert await mine.claim("acme", session.id) is None
    await start_turn(db, mine, session)
    await mine.release(session.id)
    [row] = await mine.left_behind()
    assert row.turn_index == 1


async def test_only_expired_rows_are_left_behind(db: Database, session: Session) -> None:
    mine = PartialAnswerRepo(db, LEASE)
    assert await mine.claim("acme", session.id) is None
    assert await mine.left_behind(LEASE) == []
    assert len(await mine.left_behind()) == 1
    await asyncio.sleep(LEASE + 0.1)
    assert len(await mine.left_behind(LEASE)) == 1


async def test_claiming_a_missing_session(db: Database, session: Session) -> None:
    partials = PartialAnswerRepo(db, LEASE)
    with pytest.raises(SessionNotFound):
        await partials.claim("acme", "0" * 32)
    with pytest.raises(SessionNotFound):
        await partials.claim("other-tenant", session.id)


async def test_the_transaction_lock_orders_transactions(db: Database) -> None:
    order: list[str] = []
    held = asyncio.Event()

    async def first() -> None:
        async with db.transaction() as conn:
            await db.lock_in_transaction(conn, "k", "1")
            held.set()
            order.append("first in")
            await asyncio.sleep(0.3)
            order.append("first out")

    async def second() -> None:
        await held.wait()
        async with db.transaction() as conn:
            await db.lock_in_transaction(conn, "k", "1")
            order.append("second in")

    async def other_key() -> None:
        await held.wait()
        async with db.transaction() as conn:
            await db.lock_in_transaction(conn, "k", "2")
            order.append("other key")

    tasks = [second(), first()]
    if db.engine == "postgresql":  # SQLite's writes never run at once anyway
        tasks.append(other_key())
    await asyncio.gather(*tasks)
    assert order.index("second in") > order.index("first out")
    if "other key" in order:
        assert order.index("other key") < order.index("first out")


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

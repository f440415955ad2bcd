"""Partial answers on both engines: opened with a turn's input, replaced while it streams,
deleted with its answer, never seen by history reads; and the row as a session's lease
between processes sharing a database (two repositories stand for two processes)."""

from __future__ import annotations

import asyncio
import time

import pytest
from contextd.core.errors import SessionNotFound
from contextd.core.messages import ChatMessage, Role
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.models import NewMessage, Session, UsageTotals
from contextd.store.open import Store
from contextd.store.partial_answers import Busy, Held, PartialAnswer, PartialAnswerRepo
from contextd.store.sessions import SessionRepo

LEASE = 0.3
# Where no lease may run out while a test runs (the server's default).
LONG_LEASE = 15.0


@pytest.fixture
async def session(db: Database) -> Session:
    return await SessionRepo(db).create("alice", tenant_id="acme")


def message(role: Role, text: str) -> NewMessage:
    return NewMessage(ChatMessage(role, text), turn_index=1)


async def open_turn(
    db: Database, session: Session, partials: PartialAnswerRepo
) -> ConversationRepo:
    """The turn's input stored, opening its row (as a row of ``partials``' process)."""
    conversation = ConversationRepo(db)
    opening = partials.opening("acme", session.id, 1, "cl100k_base")
    await conversation.append(
        session.id, "alice", [message(Role.USER, "hi")], tenant_id="acme", also=opening
    )
    return conversation


async def test_opened_with_the_input_then_replaced(db: Database, session: Session) -> None:
    partials = PartialAnswerRepo(db, LONG_LEASE)
    conversation = await open_turn(db, session, partials)
    [row] = await partials.left_behind()
    assert (row.tenant_id, row.session_id, row.user_id) == ("acme", session.id, "alice")
    assert (row.turn_index, row.step, row.text, row.tokenizer) == (1, 0, "", "cl100k_base")
    assert row.usage == UsageTotals() and row.updated_at >= row.started_at

    await partials.save(session.id, 0, "Once", UsageTotals(0, 0, 40))
    await partials.save(session.id, 0, "Once upon a time", UsageTotals(0, 0, 40))
    [row] = await partials.left_behind()
    assert (row.step, row.text, row.usage) == (0, "Once upon a time", UsageTotals(0, 0, 40))

    # History reads never see it.
    tail = await conversation.tail(session.id, 10, "cl100k_base", tenant_id="acme")
    assert [m.message.content for m in tail] == ["hi"]


async def test_emptied_with_a_step_and_deleted_with_the_answer(
    db: Database, session: Session
) -> None:
    partials = PartialAnswerRepo(db, LONG_LEASE)
    conversation = await open_turn(db, session, partials)
    await partials.save(session.id, 0, "Let me look", UsageTotals(0, 0, 40))
    await conversation.append(
        session.id,
        "alice",
        [message(Role.ASSISTANT, "Let me look")],
        tenant_id="acme",
        also=partials.emptying(session.id, 1, UsageTotals(30, 5, 40, 12, 4, True)),
    )
    [row] = await partials.left_behind()
    assert (row.step, row.text, row.usage) == (1, "", UsageTotals(30, 5, 40, 12, 4, True))

    await conversation.append_with_usage(
        session.id,
        "alice",
        [message(Role.ASSISTANT, "Found it.")],
        UsageTotals(60, 9, 80),
        tenant_id="acme",
        also=partials.deleting(session.id),
    )
    assert await partials.left_behind() == []
    # A write that comes late finds no row and makes none.
    await partials.save(session.id, 1, "Found", UsageTotals(0, 0, 0))
    assert await partials.left_behind() == []


async def test_a_failed_answer_keeps_the_row(db: Database, session: Session) -> None:
    partials = PartialAnswerRepo(db, LONG_LEASE)
    conversation = await open_turn(db, session, partials)
    await partials.save(session.id, 0, "Once", UsageTotals(0, 0, 40))
    with pytest.raises(SessionNotFound):  # not her session: the transaction rolls back
        await conversation.append_with_usage(
            session.id,
            "bob",
            [message(Role.ASSISTANT, "Once upon a time")],
            UsageTotals(0, 0, 40),
            tenant_id="acme",
            also=partials.deleting(session.id),
        )
    [row] = await partials.left_behind()
    assert row.text == "Once"


async def test_another_users_write_neither_opens_nor_empties_the_row(
    db: Database, session: Session
) -> None:
    """The row goes with the messages' write or not at all: where that write is one
    statement (PostgreSQL), a write refused for the session's owner writes no row."""
    partials = PartialAnswerRepo(db, LONG_LEASE)
    conversation = ConversationRepo(db)
    with pytest.raises(SessionNotFound):
        await conversation.append(
            session.id,
            "bob",
            [message(Role.USER, "hi")],
            tenant_id="acme",
            also=partials.opening("acme", session.id, 1, "cl100k_base"),
        )
    assert await partials.left_behind() == []
    await open_turn(db, session, partials)
    await partials.save(session.id, 0, "Once", UsageTotals(0, 0, 40))
    with pytest.raises(SessionNotFound):
        await conversation.append(
            session.id,
            "bob",
            [message(Role.ASSISTANT, "Once")],
            tenant_id="acme",
            also=partials.emptying(session.id, 1, UsageTotals(1, 1, 1)),
        )
    [row] = await partials.left_behind()
    assert (row.step, row.text) == (0, "Once")
    assert [
        m.message.content for m in await conversation.tail(session.id, 9, "cl", tenant_id="acme")
    ] == ["hi"]


async def test_a_new_turn_replaces_a_row_left_behind(db: Database, session: Session) -> None:
    partials = PartialAnswerRepo(db, LONG_LEASE)
    await open_turn(db, session, partials)
    await partials.save(session.id, 0, "Once", UsageTotals(0, 0, 40))
    conversation = ConversationRepo(db)
    await conversation.append(
        session.id,
        "alice",
        [NewMessage(ChatMessage(Role.USER, "again"), turn_index=2)],
        tenant_id="acme",
        also=partials.opening("acme", session.id, 2, "estimate"),
    )
    [row] = await partials.left_behind()
    assert (row.turn_index, row.text, row.tokenizer, row.usage) == (
        2,
        "",
        "estimate",
        UsageTotals(0, 0, 0),
    )


async def test_deleting_the_session_deletes_its_row(db: Database, session: Session) -> None:
    await open_turn(db, session, PartialAnswerRepo(db, LONG_LEASE))
    assert await SessionRepo(db).delete(session.id, tenant_id="acme")
    assert await PartialAnswerRepo(db, LONG_LEASE).left_behind() == []
    [row] = await db.reader.execute_fetchall("SELECT COUNT(*) FROM partial_answers")
    assert row[0] == 0


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
    assert isinstance(await mine.claim("acme", session.id), Held)
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
    assert isinstance(await dead.claim("acme", session.id), Held)
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
    assert isinstance(await mine.claim("acme", session.id), Held)
    await theirs.release(session.id)  # another process's claim stays
    assert len(await mine.left_behind()) == 1
    await mine.release(session.id)
    assert await mine.left_behind() == []
    assert isinstance(await theirs.claim("acme", session.id), Held)


async def test_a_started_turn_is_not_released(db: Database, session: Session) -> None:
    mine = PartialAnswerRepo(db, LEASE)
    assert isinstance(await mine.claim("acme", session.id), Held)
    await start_turn(db, mine, session)
    await mine.release(session.id)
    [row] = await mine.left_behind()
    assert row.turn_index == 1


async def test_only_expired_rows_are_left_behind(db: Database, session: Session) -> None:
    mine = PartialAnswerRepo(db, LEASE)
    assert isinstance(await mine.claim("acme", session.id), Held)
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


async def test_a_claim_for_another_user_s_turn_finds_no_session(
    db: Database, session: Session
) -> None:
    mine, theirs = PartialAnswerRepo(db, LEASE), PartialAnswerRepo(db, LEASE)
    for _ in range(2):  # free, then held by its user's turn: not found either way
        with pytest.raises(SessionNotFound):
            await theirs.claim("acme", session.id, "bob")
        assert [r.owner for r in await theirs.left_behind()] in ([], [mine.owner])
        if not await mine.left_behind():
            held = await mine.claim("acme", session.id, "alice")
            assert isinstance(held, Held)
            # The claim's statement reads the session's row with it (where writes go in
            # WITH); elsewhere the turn reads it after.
            if db.writes_in_with:
                assert held.session == await SessionRepo(db).get(session.id, tenant_id="acme")
            else:
                assert held.session is None


async def test_a_claim_reads_the_sessions_version_and_whether_its_log_is_open(
    db: Database, store: Store, session: Session
) -> None:
    partials, events = PartialAnswerRepo(db, LONG_LEASE), store.event_log()

    async def claimed() -> Held:
        held = await partials.claim("acme", session.id)
        assert isinstance(held, Held)
        await partials.release(session.id)
        return held

    if not db.writes_in_with:
        assert await claimed() == Held(None)  # SQLite: no other writer, nothing to read
        return
    first = await claimed()
    assert first.version is not None and first.log_open is None  # no log: read by the turn
    await events.append(session.id, "session_start", tenant_id="acme")
    await ConversationRepo(db).append(
        session.id, "alice", [message(Role.USER, "hi")], tenant_id="acme"
    )
    second = await claimed()
    assert second.log_open is True
    assert second.version is not None and second.version > first.version
    await events.append(session.id, "session_end", tenant_id="acme")
    assert (await claimed()).log_open is False

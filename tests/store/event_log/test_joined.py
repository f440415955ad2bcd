"""Event lines written with a write of the session's messages (ConversationRepo's
``also``): on PostgreSQL in the messages' one statement, or their transaction, committed
with them or not at all and numbered after the lines before; files (SQLite) cannot join
a write: the caller appends the lines after it."""

from __future__ import annotations

import pytest
from contextd.core.errors import SessionNotFound
from contextd.core.messages import ChatMessage, Role
from contextd.store.conversation import INSERT_CHUNK, ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.event_log.events import EventStore, NewEvent
from contextd.store.models import NewMessage, UsageTotals
from contextd.store.open import Store
from contextd.store.partial_answers import PartialAnswerRepo
from contextd.store.sessions import SessionRepo

from tests.store.event_log.test_events import TS, read_all


def message(text: str) -> NewMessage:
    return NewMessage(ChatMessage(Role.USER, text), turn_index=1)


def lines(*types: str) -> list[NewEvent]:
    return [NewEvent(kind, 1, ts=TS + n) for n, kind in enumerate(types)]


async def logged_session(store: Store, db: Database) -> tuple[EventStore, str]:
    """A session of alice's (tenant acme) whose log has its first line."""
    sid = (await SessionRepo(db).create("alice", tenant_id="acme")).id
    log = store.event_log()
    await log.append(sid, "session_start", ts=TS, tenant_id="acme")
    return log, sid


async def types_of(log: EventStore, sid: str) -> list[str]:
    return [e["type"] for e in await read_all(log, sid, tenant="acme")]


async def test_lines_commit_with_the_messages(store: Store, db: Database) -> None:
    log, sid = await logged_session(store, db)
    joined = log.joined(sid, lines("turn_start"), tenant_id="acme")
    if db.engine == "sqlite":
        assert joined is None
        return
    assert joined is not None
    conversation = ConversationRepo(db)
    opening = PartialAnswerRepo(db, 15.0).opening("acme", sid, 1, "cl100k_base")
    [stored] = await conversation.append(
        sid, "alice", [message("hi")], tenant_id="acme", also=(opening, joined)
    )
    assert stored.seq == 0
    assert await types_of(log, sid) == ["session_start", "turn_start"]

    # With an answer's usage too, several lines at once; then a line appended alone
    # follows them.
    end = log.joined(sid, lines("assistant", "final", "turn_end"), tenant_id="acme")
    assert end is not None
    await conversation.append_with_usage(
        sid, "alice", [message("answer")], UsageTotals(3, 2), tenant_id="acme", also=(end,)
    )
    await log.append(sid, "session_end", ts=TS, tenant_id="acme")
    assert await types_of(log, sid) == [
        "session_start", "turn_start", "assistant", "final", "turn_end", "session_end",
    ]  # fmt: skip


async def test_no_lines_for_messages_not_stored(store: Store, db: Database) -> None:
    log, sid = await logged_session(store, db)
    joined = log.joined(sid, lines("turn_start"), tenant_id="acme")
    if joined is None:
        pytest.skip("files join no write: the caller appends after it")
    conversation = ConversationRepo(db)
    for user, tenant in (("mallory", "acme"), ("alice", "default")):
        with pytest.raises(SessionNotFound):
            await conversation.append(sid, user, [message("hi")], tenant_id=tenant, also=(joined,))
    assert await types_of(log, sid) == ["session_start"]
    assert await conversation.tail(sid, 10, "cl100k_base", tenant_id="acme") == []


async def test_lines_join_a_write_in_a_transaction(store: Store, db: Database) -> None:
    """More messages than one statement takes: the lines go in their transaction."""
    log, sid = await logged_session(store, db)
    joined = log.joined(sid, lines("observation", "turn_end"), tenant_id="acme")
    if joined is None:
        pytest.skip("files join no write: the caller appends after it")
    many = [message(f"m{n}") for n in range(INSERT_CHUNK + 1)]
    stored = await ConversationRepo(db).append(sid, "alice", many, tenant_id="acme", also=(joined,))
    assert len(stored) == INSERT_CHUNK + 1
    await log.append(sid, "session_end", ts=TS, tenant_id="acme")
    assert await types_of(log, sid) == ["session_start", "observation", "turn_end", "session_end"]

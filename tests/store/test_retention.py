"""The retention purge's store side on both engines: inactive sessions are found a chunk at
a time and deleted with their messages, summaries and event logs; busy and recent ones stay."""

from __future__ import annotations

import time
from pathlib import Path

from contextd.core.messages import ChatMessage, Role
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.event_log.removals import LogRemovals
from contextd.store.models import NewMessage
from contextd.store.open import Store
from contextd.store.retention import Purged, SessionPurge
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo

DAY = 86400.0


async def test_inactive_sessions_go_with_everything_in_them(
    db: Database, store: Store, tmp_path: Path
) -> None:
    sessions, conversation, summaries = SessionRepo(db), ConversationRepo(db), SummaryRepo(db)
    events = store.event_log()
    removals = LogRemovals(db, events, tmp_path / "log-removals")
    made = [await sessions.create("alice", tenant_id=t) for t in ("default", "acme", "default")]
    for session in made:
        await conversation.append(
            session.id,
            "alice",
            [NewMessage(ChatMessage(Role.USER, "hello"))],
            tenant_id=session.tenant_id,
        )
        await summaries.upsert_session_summary(
            session.id, "alice", "hi", False, tenant_id=session.tenant_id
        )
        await events.append(session.id, "session_start", tenant_id=session.tenant_id)
    old, acme_old, recent = made
    async with db.transaction() as conn:
        await conn.execute(
            "UPDATE sessions SET updated_at = ? WHERE id IN (?, ?)",
            (time.time() - 10 * DAY, old.id, acme_old.id),
        )
    purge = SessionPurge(db, removals)
    cutoff = time.time() - DAY
    first, after = await purge.inactive(cutoff, 0, 2)
    rest, end = await purge.inactive(cutoff, after, 2)
    assert after > 0 and end == 0
    found = first + rest
    assert sorted(found) == sorted([("default", old.id), ("acme", acme_old.id)])

    kept = await purge.delete(found, cutoff, busy=lambda sid: sid == acme_old.id)
    assert kept == Purged(sessions=1, messages=1, summaries=1, event_logs=1)
    assert await sessions.get(old.id) is None
    assert [e async for e in events.read(old.id)] == []
    assert await sessions.get(acme_old.id, tenant_id="acme") is not None
    assert len([e async for e in events.read(acme_old.id, tenant_id="acme")]) == 1
    assert await sessions.get(recent.id) is not None
    # A session that became active again before the delete stays.
    assert await purge.delete(found, cutoff - 20 * DAY, busy=lambda sid: False) == Purged()
    await events.aclose()

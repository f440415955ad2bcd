"""store_copy/ from each engine into the other, two rows or lines at a time so that
every table and log is copied over several batches: the target holds the same rows and
event lines, finds the memories, and a second copy copies nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from contextd.core.content import ImagePart, TextPart
from contextd.core.messages import ChatMessage, Role
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.event_log import table
from contextd.store.memory.repository import MemoryRepo
from contextd.store.memory.vectors import MemoryVectorRepo
from contextd.store.models import NewMessage
from contextd.store.open import Store, open_store
from contextd.store.sessions import SessionRepo
from contextd.store_copy import logs as copy_logs
from contextd.store_copy import tables as copy_tables
from contextd.store_copy.copy import copy_store
from contextd.store_copy.tables import TABLES

from tests.support import images

TENANTS = ("default", "acme")
PARTS = (
    TextPart("a walrus?"),
    ImagePart(data=images.png(), media_type="image/png", width=2, height=2),
)


@pytest.fixture
async def target(
    db: Database, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Store]:
    """A store of the other engine (SQLite in the data directory ``target``)."""
    url = "" if db.engine == "postgresql" else request.getfixturevalue("postgres_url")
    other = await open_store(url, tmp_path / "target", pool_size=4)
    yield other
    await other.close()


async def _fill(store: Store) -> None:
    db = store.db
    sessions, conversation = SessionRepo(db), ConversationRepo(db)
    memories, events = MemoryRepo(db, store.memory_index), store.event_log()
    for tenant in TENANTS:
        for n in range(3):
            session = await sessions.create(f"user{n}", tenant_id=tenant, title=f"s{n}")
            await conversation.append(
                session.id,
                f"user{n}",
                [
                    NewMessage(ChatMessage(Role.USER, f"question {k} about walruses"))
                    for k in range(5)
                ]
                + [NewMessage(ChatMessage(Role.USER, "[image: image/png 2x2]", parts=PARTS))],
                tenant_id=tenant,
            )
            for k in range(5):
                await events.append(session.id, "turn_start", turn=k + 1, tenant_id=tenant)
            await memories.add(f"user{n}", f"{tenant} user{n} keeps a walrus", tenant_id=tenant)
            await memories.add(f"user{n}", f"{tenant} likes penguin {n}", tenant_id=tenant)
        async with db.transaction() as conn:
            for name in ("a", "b", "c"):
                await conn.execute(
                    "INSERT INTO prompt_templates (tenant_id, scenario, system_prompt,"
                    " updated_at) VALUES (?, ?, ?, 1.5)",
                    (tenant, name, f"{tenant} {name}"),
                )
                await conn.execute(
                    "INSERT INTO message_tokens (message_id, tokenizer, tokens)"
                    " SELECT id, ?, 7 FROM conversation WHERE tenant_id = ?",
                    (f"tok-{name}", tenant),
                )


async def _rows(db: Database) -> dict[str, list[tuple[object, ...]]]:
    return {
        table.name: [
            tuple(row)
            for row in await db.reader.execute_fetchall(
                f"SELECT {', '.join(table.columns)} FROM {table.name}"
                f" ORDER BY {', '.join(table.key)}"
            )
        ]
        for table in TABLES
    }


async def test_copied_in_batches_both_ways(
    store: Store, target: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(copy_tables, "BATCH", 2)
    monkeypatch.setattr(copy_logs, "BATCH", 2)
    monkeypatch.setattr(table, "PAGE", 2)  # PostgreSQL's lines, read for the copy
    await _fill(store)

    counts = await copy_store(store, target)
    assert all(count.matches for count in counts)
    assert {c.name: c.copied for c in counts}["event log lines"] == 5 * 3 * len(TENANTS)
    rows = await _rows(store.db)
    assert rows["message_tokens"] and rows["prompt_templates"]
    assert await _rows(target.db) == rows
    session_id, tenant_id = rows["sessions"][0][:2]
    copied, _ = await ConversationRepo(target.db).list_messages(session_id, tenant_id=tenant_id)
    assert copied[-1].message.parts == PARTS
    target_events = target.event_log()
    target_log = [e async for e in target_events.read(session_id, tenant_id=tenant_id)]
    source_events = store.event_log()
    source_log = [e async for e in source_events.read(session_id, tenant_id=tenant_id)]
    assert target_log == source_log and len(source_log) == 5

    target_memories = MemoryRepo(target.db, target.memory_index)
    found = await target_memories.search("user1", "walrus", tenant_id="acme")
    assert [m.memory.content for m in found] == ["acme user1 keeps a walrus"]
    added, _ = await target_memories.add("user1", "a new one after the copy")
    assert added.id > max(int(row[0]) for row in rows["memories"])

    again = await copy_store(store, target)
    assert [c.copied for c in again] == [0] * len(again)
    assert all(c.matches and c.present == c.source for c in again)


async def test_vectors_are_not_copied_but_made_again(store: Store, target: Store) -> None:
    memories = MemoryRepo(store.db, store.memory_index)
    vectors = MemoryVectorRepo(store.db, "fake-embed-1")
    await memories.add("ada", "I am vegetarian")
    await vectors.save(await vectors.pending(), [[1.0, 0.0]])
    assert await vectors.count_pending() == 0
    await copy_store(store, target)
    copied = MemoryVectorRepo(target.db, "fake-embed-1")
    assert [m.content for m in await copied.pending()] == ["I am vegetarian"]

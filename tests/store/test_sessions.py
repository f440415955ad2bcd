"""SessionRepo on both engines: create and read sessions, list a user's sessions in pages,
delete one with everything in it; a session stays in its tenant."""

from __future__ import annotations

import pytest
from contextd.core.errors import SessionNotFound
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo

from tests.support.store_helpers import assistant, count, make_sessions, user

A, B = "acme", "globex"


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


async def test_sessions_and_messages_stay_in_their_tenant(db: Database) -> None:
    sessions, conversation = SessionRepo(db), ConversationRepo(db)
    mine = await sessions.create("bob", title="A's", tenant_id=A)
    theirs = await sessions.create("bob", title="B's", tenant_id=B)
    assert mine.tenant_id == A and theirs.tenant_id == B
    assert await sessions.get(mine.id, tenant_id=B) is None
    assert await sessions.get(mine.id) is None  # nor in the default tenant
    got = await sessions.get(mine.id, tenant_id=A)
    assert got is not None and got.title == "A's"
    assert [s.title for s in (await sessions.list_sessions("bob", tenant_id=A))[0]] == ["A's"]
    assert [s.title for s in (await sessions.list_sessions("bob", tenant_id=B))[0]] == ["B's"]
    assert (await sessions.list_sessions("bob"))[0] == []

    [stored] = await conversation.append(mine.id, "bob", [user("in A")], tenant_id=A)
    # Bob of tenant B cannot write into A's session, whatever he knows of its id.
    with pytest.raises(SessionNotFound):
        await conversation.append(mine.id, "bob", [user("from B")], tenant_id=B)
    with pytest.raises(SessionNotFound):
        await conversation.append(mine.id, "bob", [user("default")])
    assert await conversation.get(stored.id, tenant_id=B) is None
    found = await conversation.get(stored.id, tenant_id=A)
    assert found is not None and found.message.content == "in A"

    # The newest rows are kept per (tenant, session): another tenant's read of the same
    # id finds neither kept rows nor stored ones, and keeps nothing.
    assert [m.message.content for m in await conversation.tail(mine.id, 5, "cl", tenant_id=A)] == [
        "in A"
    ]
    assert await conversation.tail(mine.id, 5, "cl", tenant_id=B) == []
    assert await conversation.first(mine.id, tenant_id=B) is None
    assert (await conversation.list_messages(mine.id, tenant_id=B))[0] == []
    assert await conversation.set_collected(stored.id, True, tenant_id=B) is None
    assert not await sessions.delete(mine.id, tenant_id=B)
    assert await sessions.get(mine.id, tenant_id=A) is not None
    assert await sessions.delete(mine.id, tenant_id=A)
    assert await conversation.tail(mine.id, 5, "cl", tenant_id=A) == []

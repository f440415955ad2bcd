"""The tail cache, a session's newest messages kept in memory by ConversationRepo: what a
cached read returns is what the database holds, after every kind of write (new messages,
token counts, collected flags, deleted sessions); on both engines."""

from __future__ import annotations

import pytest
from contextd.core.errors import SessionNotFound
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.store import conversation_reads
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.engine.postgresql import PgConnection
from contextd.store.engine.sqlite import SqliteConnection
from contextd.store.models import NewMessage
from contextd.store.sessions import SessionRepo

from tests.support.store_helpers import assert_tail_matches_disk, from_disk, message, no_statements


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
    monkeypatch.setattr(conversation_reads, "TAIL_CACHE_ROWS", 5)
    monkeypatch.setattr(conversation_reads, "TAIL_CACHE_SESSIONS", 2)
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
    monkeypatch.setattr(conversation_reads, "TAIL_CACHE_CHARS", 1)
    await repo.append(ids[1], "alice", [message(Role.USER, "too big to keep")])
    await assert_tail_matches_disk(db, repo, ids[1])


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


async def test_a_first_message_read_once_is_kept_until_a_row_changes(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conversation_reads, "TAIL_CACHE_ROWS", 3)  # the first is not among them
    repo = ConversationRepo(db)
    session = await SessionRepo(db).create("alice")
    await repo.append(session.id, "alice", [message(Role.USER, f"m{i}", cl=i) for i in range(6)])
    await repo.tail(session.id, 3, "cl")
    version = await repo.current_version(session.id)  # None on SQLite: no other writer
    first = await repo.first(session.id, version=version)  # read, then kept
    assert first is not None and first.message.content == "m0" and first.tokens == {"cl": 0}

    def no_query(*args: object) -> None:
        raise AssertionError("the first message was read from the database")

    with monkeypatch.context() as patch:
        patch.setattr(SqliteConnection, "execute_fetchall", no_query)
        patch.setattr(PgConnection, "execute_fetchall", no_query)
        assert await repo.first(session.id, version=version) == first
    # Appends and counts leave it kept, with the counts.
    await repo.append(session.id, "alice", [message(Role.USER, "m6")])
    await repo.save_tokens([(first.id, "new", 7)], session.id)
    version = await repo.current_version(session.id)
    kept = await repo.first(session.id, version=version)
    assert kept is not None and kept.tokens == {"cl": 0, "new": 7}
    assert kept == await ConversationRepo(db).first(session.id, version=version)
    # A changed row drops it: written by this repository, or (where other processes
    # write) by another whose write moved the version on.
    await repo.set_collected(first.id, True)
    version = await repo.current_version(session.id)
    collected = await repo.first(session.id, version=version)
    assert collected is not None and collected.is_collected
    if version is not None:
        await ConversationRepo(db).set_collected(first.id, False)
        version = await repo.current_version(session.id)
        again = await repo.first(session.id, version=version)
        assert again is not None and not again.is_collected


@pytest.mark.sqlite_only
async def test_a_window_wider_than_the_cache_leaves_the_cached_rows_in_place(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conversation_reads, "TAIL_CACHE_ROWS", 5)
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

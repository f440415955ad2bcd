"""What several store test modules share: messages to store, a count read from the
database, a user's sessions made one after another, the tail as a repository with nothing
kept reads it, a block in which no read may reach the database, and SQLite's check of its
memory index."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from contextd.core.messages import ChatMessage, Role
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.engine.sqlite import SqliteConnection
from contextd.store.models import NewMessage, Session, StoredMessage
from contextd.store.sessions import SessionRepo


def user(text: str, **tokens: int) -> NewMessage:
    return NewMessage(ChatMessage(Role.USER, text), tokens=dict(tokens))


def assistant(text: str, **tokens: int) -> NewMessage:
    return NewMessage(ChatMessage(Role.ASSISTANT, text), tokens=dict(tokens))


async def count(db: Database, sql: str, *params: object) -> int:
    rows = list(await db.reader.execute_fetchall(sql, params))
    return int(rows[0][0])


async def make_sessions(sessions: SessionRepo, user_id: str, n: int) -> list[Session]:
    made = [await sessions.create(user_id, title=f"s{i}") for i in range(n)]
    return made[::-1]  # newest first


def message(role: Role, text: str, **tokens: int) -> NewMessage:
    return NewMessage(ChatMessage(role, text), turn_index=1, tokens=dict(tokens))


async def from_disk(
    db: Database, session_id: str, limit: int, tokenizer: str
) -> list[StoredMessage]:
    """The tail as a repository with nothing cached reads it."""
    return list(await ConversationRepo(db).tail(session_id, limit, tokenizer))


async def assert_tail_matches_disk(
    db: Database, repo: ConversationRepo, session_id: str, tokenizer: str = "cl"
) -> None:
    for limit in (1, 3, 64, 1000):
        cached = await repo.tail(session_id, limit, tokenizer)
        assert cached == await from_disk(db, session_id, limit, tokenizer), limit


@contextlib.contextmanager
def no_statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fails the test if a read inside the block runs a statement."""

    def no_query(*args: object) -> None:
        raise AssertionError("read from the database")

    with monkeypatch.context() as patch:
        patch.setattr(SqliteConnection, "execute_fetchall", no_query)
        yield


async def fts_integrity(db: Database) -> None:
    """SQLite's FTS5 check of its index (PostgreSQL's terms are a column of the row)."""
    if db.engine != "sqlite":
        return
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 0)"
        )

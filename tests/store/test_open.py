"""The store's opener: the database URL (anything but PostgreSQL's refused, the password
masked for logs), and the parts each engine gets with its database."""

from __future__ import annotations

from pathlib import Path

import pytest
from contextd.store.event_log.events import HISTORY_DIR
from contextd.store.event_log.files import FileLines
from contextd.store.event_log.table import TableLines
from contextd.store.memory.fts5_index import FtsIndex
from contextd.store.memory.tsvector_index import TsvectorIndex
from contextd.store.open import Store, check_database_url, masked_url
from contextd.store.sessions import SessionRepo


def test_urls_are_checked_and_masked() -> None:
    check_database_url("postgresql://u:p@db:5432/contextd")
    check_database_url("postgres://db/contextd")
    with pytest.raises(SystemExit, match="only postgresql://") as refused:
        check_database_url("mysql://root:hunter2@db/contextd")
    assert "hunter2" not in str(refused.value)
    assert masked_url("postgresql://u:hunter2@db:5432/c") == "postgresql://u:***@db:5432/c"
    assert masked_url("postgresql://u:pw@[::1]/c?sslmode=require") == (
        "postgresql://u:***@[::1]/c?sslmode=require"
    )
    assert masked_url("postgresql://db/c") == "postgresql://db/c"


PARTS = {
    "sqlite": (FtsIndex, FileLines),
    "postgresql": (TsvectorIndex, TableLines),
}


async def test_each_engine_gets_its_own_parts(
    store: Store, sessions: SessionRepo, tmp_path: Path
) -> None:
    history = tmp_path / HISTORY_DIR
    assert not history.exists()  # nothing made before a log is asked for
    session = await sessions.create("alice")
    log = store.event_log()
    try:
        parts = (type(store.memory_index), type(store.event_lines))
        assert parts == PARTS[store.db.engine]
        # Files in the data directory for SQLite; PostgreSQL's replicas share no disk.
        assert history.is_dir() == (store.db.engine == "sqlite")
        await log.append(session.id, "session_start")
        assert await store.event_lines.count("default", session.id) == 1
    finally:
        await log.aclose()

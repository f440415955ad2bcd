"""Fixtures of the app tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from contextd.store.engine.sqlite import SqliteDatabase

from tests.support.after_turn_env import Env


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    db = await SqliteDatabase.open(tmp_path / "contextd.sqlite3")
    environment = Env(db)
    yield environment
    for runner in environment.runners:
        await runner.aclose()
    await db.close()

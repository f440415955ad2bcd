"""The copy tests' source store, on both engines (tests/support/engines.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from contextd.store.engine.database import Database
from contextd.store.open import Store

from tests.support import engines


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", engines.SQLITE_ONLY)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    engines.parametrize(metafunc)


@pytest.fixture
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with engines.opened(request.param, tmp_path, request) as opened:
        yield opened


@pytest.fixture
def db(store: Store) -> Database:
    return store.db

"""The copy tests' source database, on both engines (tests/support/engines.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from contextd.store.engine.database import Database

from tests.support import engines


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", engines.SQLITE_ONLY)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    engines.parametrize(metafunc)


@pytest.fixture
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    async with engines.opened(request.param, tmp_path, request) as database:
        yield database

"""Fixtures of the app tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.after_turn_env import Env, env_in


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with env_in(tmp_path) as environment:
        yield environment

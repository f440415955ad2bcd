"""Fixtures of the client tests: SDK clients of the session's server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from contextd_client import (
    AsyncContextClient,
    ContextClient,
)


@pytest.fixture(scope="module")
def client(address: str) -> Iterator[ContextClient]:
    with ContextClient(address) as c:
        yield c


@pytest.fixture
async def aclient(address: str) -> AsyncIterator[AsyncContextClient]:
    async with AsyncContextClient(address) as c:
        yield c

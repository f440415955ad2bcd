"""Fixtures of the API tests: contextd processes wired to fake OpenAI / Anthropic servers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import grpc.aio
import pytest
from contextd.v1 import chat_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc

from tests.support.chat_live import BIG, ChatFake, Live, anthropic_fake, openai_fake
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.pg_databases import database_url_for
from tests.support.server import start_server


@asynccontextmanager
async def live_server(
    data_dir: Path,
    fake: ChatFake,
    provider: str,
    model: str,
    database_url: str = "",
    *flags: str,
) -> AsyncIterator[Live]:
    """``contextd serve --provider PROVIDER`` (and ``flags``) talking to ``fake``, and
    stubs for it."""
    async with fake:
        proc = start_server(
            data_dir,
            *("--provider", provider, "--provider-base-url", fake.url),
            *("--provider-model", model, "--provider-timeout", "10"),
            *flags,
            env={f"CONTEXTD_{provider.upper()}_API_KEY": FAKE_KEY},
            database_url=database_url,
        )
        try:
            async with grpc.aio.insecure_channel(proc.address, options=BIG) as channel:
                yield Live(
                    fake,
                    proc,
                    chat_pb2_grpc.ChatServiceStub(channel),
                    sessions_pb2_grpc.SessionServiceStub(channel),
                    memory_pb2_grpc.MemoryServiceStub(channel),
                    database_url,
                )
        finally:
            # In a thread: the fake, in this loop, must keep serving the server's
            # background model calls while it shuts down.
            assert await asyncio.to_thread(proc.stop) == 0
        assert not any(FAKE_KEY in json.dumps(line) for line in proc.log_lines), "key in logs"


@pytest.fixture(scope="module")
async def openai_live(
    tmp_path_factory: pytest.TempPathFactory, backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[Live]:
    data_dir = tmp_path_factory.mktemp("chat-openai")
    url = database_url_for(request, backend)
    async with live_server(data_dir, openai_fake(), "openai", "gpt-test", url) as live:
        yield live


@pytest.fixture(scope="module")
async def anthropic_live(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Live]:
    data_dir = tmp_path_factory.mktemp("chat-anthropic")
    async with live_server(data_dir, anthropic_fake(), "anthropic", "claude-test") as live:
        yield live

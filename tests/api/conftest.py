"""Fixtures of the API tests: contextd processes wired to fake OpenAI / Anthropic servers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest
from contextd.v1 import chat_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc

from tests.support.chat_live import (
    BIG,
    Live,
    anthropic_fake,
    openai_fake,
)
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.server import start_server


@pytest.fixture(scope="module")
async def openai_live(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Live]:
    fake = openai_fake()
    async with fake:
        proc = start_server(
            tmp_path_factory.mktemp("chat-openai"),
            *("--provider", "openai", "--provider-base-url", fake.url),
            *("--provider-model", "gpt-test", "--provider-timeout", "10"),
            env={"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
        )
        try:
            async with grpc.aio.insecure_channel(proc.address, options=BIG) as channel:
                yield Live(
                    fake,
                    proc,
                    chat_pb2_grpc.ChatServiceStub(channel),
                    sessions_pb2_grpc.SessionServiceStub(channel),
                    memory_pb2_grpc.MemoryServiceStub(channel),
                )
        finally:
            # In a thread: the fake, in this loop, must keep serving the server's
            # background model calls while it shuts down.
            assert await asyncio.to_thread(proc.stop) == 0
        assert not any(FAKE_KEY in json.dumps(line) for line in proc.log_lines), "key in logs"


@pytest.fixture(scope="module")
async def anthropic_live(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Live]:
    fake = anthropic_fake()
    async with fake:
        proc = start_server(
            tmp_path_factory.mktemp("chat-anthropic"),
            *("--provider", "anthropic", "--provider-base-url", fake.url),
            *("--provider-model", "claude-test", "--provider-timeout", "10"),
            env={"CONTEXTD_ANTHROPIC_API_KEY": FAKE_KEY},
        )
        try:
            async with grpc.aio.insecure_channel(proc.address, options=BIG) as channel:
                yield Live(
                    fake,
                    proc,
                    chat_pb2_grpc.ChatServiceStub(channel),
                    sessions_pb2_grpc.SessionServiceStub(channel),
                    memory_pb2_grpc.MemoryServiceStub(channel),
                )
        finally:
            # In a thread: the fake, in this loop, must keep serving the server's
            # background model calls while it shuts down.
            assert await asyncio.to_thread(proc.stop) == 0

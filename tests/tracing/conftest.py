"""An in-process server whose spans go to an in-memory exporter (installed through
``contextd.tracing.spans.install``, not through the environment), wired to the fake
OpenAI-compatible server, with the web port on."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc.aio
import pytest
from contextd.root import server as contextd_server
from contextd.root.logs import JsonFormatter
from contextd.tracing import spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.chat_live import ChatFake, openai_fake
from tests.support.sdk import free_port
from tests.support.settings import terms_only
from tests.support.web_port import ALLOWED


class LogLines(logging.Handler):
    """The server's log lines as its JSON formatter writes them, formatted at once (in
    the context of the code that logs, as the server's own handler does)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@dataclass
class Traced:
    exporter: InMemorySpanExporter
    fake: ChatFake
    channel: grpc.aio.Channel
    web: str
    logs: LogLines


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans.install(provider)
    yield exporter
    spans.install(None)
    provider.shutdown()


@pytest.fixture(scope="module")
async def traced(
    exporter: InMemorySpanExporter, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Traced]:
    fake = await openai_fake().start()
    assert isinstance(fake, ChatFake)
    web_port = free_port()
    settings = terms_only(
        port=0,
        data_dir=Path(tmp_path_factory.mktemp("traced")),
        provider="openai",
        provider_base_url=fake.url,
        provider_model="fake-model",
        web_port=web_port,
        cors_origins=ALLOWED,
    )
    logs = LogLines()
    root = logging.getLogger("contextd")
    root.addHandler(logs)
    root.setLevel(logging.INFO)
    running = await contextd_server.start(settings)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            yield Traced(exporter, fake, channel, f"127.0.0.1:{web_port}", logs)
    finally:
        await running.stop(0)
        await fake.stop()
        root.removeHandler(logs)

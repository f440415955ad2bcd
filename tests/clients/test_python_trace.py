"""The Python SDK sends the caller's OpenTelemetry trace context with its calls.

Against the scripted chat server (tests/support/fake_chat_server.py), which records every
call's metadata: inside a span, unary and streaming calls of both clients carry a
``traceparent`` of that span; outside any span, or with ``propagate_trace=False``, none;
the caller's own ``traceparent`` wins. A process that never loads OpenTelemetry does not
get it loaded by the SDK.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from contextd_client import AsyncContextClient, ContextClient
from opentelemetry import propagate
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Span, Tracer

from tests.support.fake_chat_server import FakeChatServer, fake_chat_server

OWN_TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeChatServer]:
    with fake_chat_server() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeChatServer) -> FakeChatServer:
    server.calls.clear()
    return server


@pytest.fixture(scope="module")
def tracer() -> Tracer:
    # A provider of its own, not the global one: the current span is what matters here.
    return TracerProvider().get_tracer("contextd-client-tests")


def traceparent_of(span: Span) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def sent(fake: FakeChatServer) -> dict[str, dict[str, Any]]:
    """The metadata of each RPC the fake received (the last call of each)."""
    return {name: metadata for name, metadata in fake.calls}


def test_sync_calls_in_a_span_carry_its_traceparent(fake: FakeChatServer, tracer: Tracer) -> None:
    with ContextClient(fake.address, timeout=10) as client:
        with tracer.start_as_current_span("caller") as span:
            session = client.create_session("u")
            list(client.stream_chat("hello", user_id="u", session_id=session["id"]))
            events = client.export_events("u", session["id"])
        # Read after the span ended: still the span's call (its second event is broken).
        assert next(events)["type"] == "session_start"
        events.close()
    calls = sent(fake)
    assert set(calls) == {"CreateSession", "StreamChat", "ExportEvents"}
    for name, metadata in calls.items():
        assert metadata.get("traceparent") == traceparent_of(span), name


async def test_async_calls_in_a_span_carry_its_traceparent(
    fake: FakeChatServer, tracer: Tracer
) -> None:
    async with AsyncContextClient(fake.address, timeout=10) as client:
        with tracer.start_as_current_span("caller") as span:
            session = await client.create_session("u")
            stream = client.stream_chat("hello", user_id="u", session_id=session["id"])
            events = client.export_events("u", session["id"])
        # Both streams start at their first read, after the span ended.
        [event async for event in stream]
        assert (await anext(events))["type"] == "session_start"  # the second is broken
        await events.aclose()
    calls = sent(fake)
    assert set(calls) == {"CreateSession", "StreamChat", "ExportEvents"}
    for name, metadata in calls.items():
        assert metadata.get("traceparent") == traceparent_of(span), name


async def test_an_async_stream_chat_asking_a_token_carries_the_callers_trace(
    fake: FakeChatServer, tracer: Tracer
) -> None:
    async def token() -> str:
        return "t0ken"

    async with AsyncContextClient(fake.address, timeout=10, token=token) as client:
        with tracer.start_as_current_span("caller") as span:
            stream = client.stream_chat("hello", user_id="u")
        [event async for event in stream]
    [(name, metadata)] = fake.calls
    assert name == "StreamChat"
    assert metadata["traceparent"] == traceparent_of(span)
    assert metadata["authorization"] == "Bearer t0ken"


async def test_no_span_no_traceparent(fake: FakeChatServer) -> None:
    with ContextClient(fake.address, timeout=10) as client:
        list(client.stream_chat("hello", user_id="u"))
    async with AsyncContextClient(fake.address, timeout=10) as aclient:
        await aclient.create_session("u")
    assert len(fake.calls) == 2
    assert all("traceparent" not in metadata for _, metadata in fake.calls)


async def test_propagate_trace_false_sends_none(fake: FakeChatServer, tracer: Tracer) -> None:
    with ContextClient(fake.address, timeout=10, propagate_trace=False) as client:
        async with AsyncContextClient(fake.address, timeout=10, propagate_trace=False) as aclient:
            with tracer.start_as_current_span("caller"):
                client.create_session("u")
                [event async for event in aclient.stream_chat("hello", user_id="u")]
    assert len(fake.calls) == 2
    assert all("traceparent" not in metadata for _, metadata in fake.calls)


async def test_the_callers_own_traceparent_wins(fake: FakeChatServer, tracer: Tracer) -> None:
    own = {"traceparent": OWN_TRACEPARENT}
    with ContextClient(fake.address, timeout=10, metadata=own) as client:
        async with AsyncContextClient(fake.address, timeout=10, metadata=own) as aclient:
            with tracer.start_as_current_span("caller"):
                client.create_session("u")
                list(client.stream_chat("hello", user_id="u"))
                await aclient.create_session("u")
                [event async for event in aclient.stream_chat("hello", user_id="u")]
    assert len(fake.calls) == 4
    for _, metadata in fake.calls:
        assert metadata["traceparent"] == OWN_TRACEPARENT
        assert "tracestate" not in metadata


class _Marker(TextMapPropagator):
    """A propagator of its own format, as OTEL_PROPAGATORS or set_global_textmap choose."""

    def extract(self, carrier: Any, context: Any = None, getter: Any = None) -> Any:
        raise NotImplementedError

    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        carrier["x-marker"] = "from-the-global-propagator"

    @property
    def fields(self) -> set[str]:
        return {"x-marker"}


def test_the_global_propagator_decides_what_is_sent(fake: FakeChatServer, tracer: Tracer) -> None:
    previous = propagate.get_global_textmap()
    propagate.set_global_textmap(_Marker())
    try:
        with (
            ContextClient(fake.address, timeout=10) as client,
            tracer.start_as_current_span("caller"),
        ):
            client.create_session("u")
    finally:
        propagate.set_global_textmap(previous)
    [(_, metadata)] = fake.calls
    assert metadata["x-marker"] == "from-the-global-propagator"
    assert "traceparent" not in metadata


def test_a_process_without_opentelemetry_does_not_load_it(fake: FakeChatServer) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio, json, sys
        from contextd_client import AsyncContextClient, ContextClient

        with ContextClient({fake.address!r}, timeout=10) as client:
            client.create_session("u")
            list(client.stream_chat("hello", user_id="u"))

        async def main():
            async with AsyncContextClient({fake.address!r}, timeout=10) as client:
                await client.create_session("u")

        asyncio.run(main())
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("opentelemetry"))))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
    assert len(fake.calls) == 3
    assert all("traceparent" not in metadata for _, metadata in fake.calls)

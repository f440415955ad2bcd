"""EchoProvider: the offline default answers with what it received."""

from __future__ import annotations

import asyncio
import time

import pytest
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.providers.base import (
    Finished,
    ModelRequest,
    TextDelta,
    ToolCallReady,
    ToolSpec,
    Usage,
)
from contextd.providers.echo import EchoProvider, echo_answer, split_chunks

from tests.support.fakes.helpers import collect, text_of

REQUEST = ModelRequest(
    messages=[
        ChatMessage(Role.SYSTEM, "You are terse."),
        ChatMessage(Role.USER, "What is the weather?"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(ToolCall("c1", "weather", '{"city":"Oslo"}'),)),
        ChatMessage(Role.TOOL, "rain", tool_call_id="c1"),
        ChatMessage(Role.USER, "And tomorrow in Oslo?"),
    ],
    prompt_tokens_estimate=123,
    tools=[ToolSpec("weather", "Weather for a city")],
)

EXPECTED = (
    "echo: I received 5 messages (about 123 prompt tokens). "
    "Your last message was: “And tomorrow in Oslo?”"
)


async def test_echo_states_what_it_received() -> None:
    events = await collect(EchoProvider(), REQUEST)
    assert text_of(events) == EXPECTED
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 3, "streamed in several chunks"
    assert all(d.text for d in deltas)
    assert events[-2] == Usage(123, len(EXPECTED.split()), estimated=True)
    assert events[-1] == Finished("stop")
    assert not any(isinstance(e, ToolCallReady) for e in events), "never calls tools"


async def test_echo_is_deterministic() -> None:
    provider = EchoProvider()
    assert await collect(provider, REQUEST) == await collect(provider, REQUEST)
    assert await collect(EchoProvider(), REQUEST) == await collect(provider, REQUEST)


async def test_echo_chunks_are_word_groups() -> None:
    events = await collect(EchoProvider(words_per_chunk=2), REQUEST)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas[0] == "echo: I "
    assert all(len(d.split()) <= 2 for d in deltas)
    assert "".join(deltas) == EXPECTED


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [ChatMessage(Role.USER, "hi")],
            "echo: I received 1 message (about 0 prompt tokens). Your last message was: “hi”",
        ),
        (
            [ChatMessage(Role.SYSTEM, "sys")],
            "echo: I received 1 message (about 0 prompt tokens). Your last message was: (none)",
        ),
        ([], "echo: I received 0 messages (about 0 prompt tokens). Your last message was: (none)"),
    ],
)
def test_echo_answer_edge_cases(messages: list[ChatMessage], expected: str) -> None:
    assert echo_answer(ModelRequest(messages=messages)) == expected


def test_split_chunks_joins_back() -> None:
    text = "  a  b\nc  d e  "
    for n in (1, 2, 3, 10):
        assert "".join(split_chunks(text, n)) == text
    assert split_chunks("", 3) == []
    assert split_chunks("   ", 3) == ["   "]


async def test_echo_chunk_delay_paces_the_stream() -> None:
    provider = EchoProvider(chunk_delay=0.02, words_per_chunk=4)
    chunks = len(split_chunks(EXPECTED, 4))
    started = time.monotonic()
    events = await collect(provider, REQUEST)
    assert time.monotonic() - started >= 0.02 * (chunks - 1) * 0.9
    assert text_of(events) == EXPECTED


async def test_echo_stops_when_the_consumer_stops() -> None:
    provider = EchoProvider(chunk_delay=10)
    stream = provider.stream(REQUEST)
    first = await anext(stream)
    assert isinstance(first, TextDelta)
    # The next chunk waits 10 s; cancelling the waiting consumer ends it at once.
    task = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await stream.aclose()


def test_echo_rejects_bad_settings() -> None:
    with pytest.raises(ValueError):
        EchoProvider(chunk_delay=-1)
    with pytest.raises(ValueError):
        EchoProvider(words_per_chunk=0)

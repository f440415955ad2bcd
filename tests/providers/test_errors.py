"""Failures and cancellation, the same for every SDK-backed provider."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from contextd.core.messages import ChatMessage, Role
from contextd.providers._sdk import (
    Redactor,
    error_detail,
    error_type,
    parse_retry_after,
    stream_error,
)
from contextd.providers.anthropic_messages import AnthropicProvider
from contextd.providers.base import ModelRequest, Provider, TextDelta
from contextd.providers.errors import (
    ProviderAuthError,
    ProviderBadResponse,
    ProviderError,
    ProviderRateLimited,
    ProviderUnavailable,
)
from contextd.providers.openai_compat import OpenAIProvider

from tests.support.fakes import anthropic_sse as an
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import (
    FAKE_KEY,
    assert_secret_absent,
    collect,
    collect_until_error,
    text_of,
)
from tests.support.fakes.llm_server import FakeLLMServer, Frame, JSONReply, StreamReply, raw, sse

REQUEST = ModelRequest(messages=[ChatMessage(Role.USER, "Tell me a long story.")])


@dataclass(frozen=True)
class Kit:
    """What a test needs to know about one provider's wire format."""

    name: str
    base_path: str
    make: Callable[..., Provider]
    ok: Callable[[list[str]], StreamReply]
    # The opening frames and one text delta per piece, without the end of the stream.
    opening: Callable[[list[str]], list[Frame]]
    error_body: Callable[[str, str], dict[str, Any]]  # (type, message)
    error_event: Callable[[str, str], Frame]  # (type, message) inside a stream
    overloaded_type: str
    rate_limit_type: str
    auth_type: str


def _openai_opening(pieces: list[str]) -> list[Frame]:
    return oa.text_frames(pieces)[: 1 + len(pieces)]


def _anthropic_opening(pieces: list[str]) -> list[Frame]:
    return [an.message_start(), *an.text_block(0, pieces)[:-1]]


KITS = {
    "openai": Kit(
        name="openai",
        base_path="/v1",
        make=OpenAIProvider,
        ok=lambda pieces: oa.text_reply(pieces),
        opening=_openai_opening,
        error_body=lambda type_, message: oa.error_body(message, type_),
        error_event=lambda type_, message: sse({"error": {"message": message, "type": type_}}),
        overloaded_type="server_error",
        rate_limit_type="rate_limit_exceeded",
        auth_type="invalid_api_key",
    ),
    "anthropic": Kit(
        name="anthropic",
        base_path="",
        make=AnthropicProvider,
        ok=lambda pieces: an.text_reply(pieces),
        opening=_anthropic_opening,
        error_body=an.error_body,
        error_event=an.error_event,
        overloaded_type="overloaded_error",
        rate_limit_type="rate_limit_error",
        auth_type="authentication_error",
    ),
}


@dataclass
class Setup:
    kit: Kit
    fake: FakeLLMServer
    provider: Provider

    def make(self, **kwargs: Any) -> Provider:
        options: dict[str, Any] = {
            "api_key": FAKE_KEY,
            "base_url": self.fake.url,
            "retry_base_delay": 0.01,
            "timeout": 5,
        }
        options.update(kwargs)
        return self.kit.make(**options)


@pytest.fixture(params=sorted(KITS))
async def setup(request: pytest.FixtureRequest) -> AsyncIterator[Setup]:
    kit = KITS[request.param]
    async with FakeLLMServer(base_path=kit.base_path) as fake:
        provider = kit.make(api_key=FAKE_KEY, base_url=fake.url, retry_base_delay=0.01, timeout=5)
        yield Setup(kit, fake, provider)
        await provider.aclose()


async def failure(setup: Setup, provider: Provider | None = None) -> BaseException:
    _, error = await collect_until_error(provider or setup.provider, REQUEST)
    assert isinstance(error, ProviderError), repr(error)
    assert error.provider == setup.kit.name
    assert_secret_absent(error)
    return error


# -- HTTP status before the stream ----------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
async def test_rejected_credentials(setup: Setup, status: int) -> None:
    message = f"Incorrect API key provided: {FAKE_KEY}."  # some servers echo the key
    setup.fake.script(JSONReply(status, setup.kit.error_body(setup.kit.auth_type, message)))
    error = await failure(setup)
    assert isinstance(error, ProviderAuthError)
    assert f"HTTP {status}" in str(error)
    assert "[redacted]" in str(error)
    assert len(setup.fake.requests) == 1, "not retried"


async def test_rate_limited_with_retry_after(setup: Setup) -> None:
    body = setup.kit.error_body(setup.kit.rate_limit_type, f"Slow down, {FAKE_KEY}")
    setup.fake.script(JSONReply(429, body, {"Retry-After": "7"}))
    started = time.monotonic()
    error = await failure(setup)
    assert isinstance(error, ProviderRateLimited)
    assert error.retry_after == 7
    assert len(setup.fake.requests) == 1, "a rate limit is the host's call, not retried here"
    assert time.monotonic() - started < 2


async def test_rate_limited_without_retry_after(setup: Setup) -> None:
    setup.fake.script(JSONReply(429, setup.kit.error_body(setup.kit.rate_limit_type, "slow")))
    error = await failure(setup)
    assert isinstance(error, ProviderRateLimited)
    assert error.retry_after is None


@pytest.mark.parametrize("status", [500, 502, 503, 529])
async def test_server_errors_retried_then_unavailable(setup: Setup, status: int) -> None:
    body = setup.kit.error_body(setup.kit.overloaded_type, "try later")
    setup.fake.script(JSONReply(status, body), repeat_last=True)
    error = await failure(setup)
    assert isinstance(error, ProviderUnavailable)
    assert f"HTTP {status}" in str(error)
    assert len(setup.fake.requests) == 3, "the first attempt and max_retries=2 retries"
    assert setup.fake.bodies()[0] == setup.fake.bodies()[2], "the same request each time"


async def test_max_retries_configurable(setup: Setup) -> None:
    provider = setup.make(max_retries=0)
    setup.fake.script(JSONReply(500, {"error": {"message": "x"}}), repeat_last=True)
    try:
        error = await failure(setup, provider)
    finally:
        await provider.aclose()
    assert isinstance(error, ProviderUnavailable)
    assert len(setup.fake.requests) == 1


async def test_server_error_then_success(setup: Setup) -> None:
    body = setup.kit.error_body(setup.kit.overloaded_type, "busy")
    setup.fake.script(JSONReply(503, body), setup.kit.ok(["recovered"]))
    events = await collect(setup.provider, REQUEST)
    assert text_of(events) == "recovered"
    assert len(setup.fake.requests) == 2


async def test_long_retry_after_on_503_ends_retries(setup: Setup) -> None:
    setup.fake.script(JSONReply(503, {"error": {"message": "x"}}, {"Retry-After": "120"}))
    error = await failure(setup)
    assert isinstance(error, ProviderUnavailable)
    assert len(setup.fake.requests) == 1


@pytest.mark.parametrize("status", [400, 404, 422])
async def test_refused_request_is_bad_response(setup: Setup, status: int) -> None:
    setup.fake.script(JSONReply(status, setup.kit.error_body("invalid_request_error", "bad")))
    error = await failure(setup)
    assert isinstance(error, ProviderBadResponse)
    assert len(setup.fake.requests) == 1


async def test_unreachable_server_is_unavailable(setup: Setup) -> None:
    with socket.socket() as sock:  # a port with nobody listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = setup.make(base_url=f"http://127.0.0.1:{port}{setup.kit.base_path}")
    try:
        error = await failure(setup, provider)
    finally:
        await provider.aclose()
    assert isinstance(error, ProviderUnavailable)


# -- failures inside the stream -------------------------------------------------


async def test_stalled_stream_times_out(setup: Setup) -> None:
    provider = setup.make(timeout=0.3, max_retries=0)
    setup.fake.script(StreamReply(setup.kit.opening(["Once"]), ending="hang"))
    started = time.monotonic()
    try:
        events, error = await collect_until_error(provider, REQUEST)
    finally:
        await provider.aclose()
    assert isinstance(error, ProviderUnavailable)
    assert_secret_absent(error)
    assert text_of(events) == "Once"
    assert time.monotonic() - started < 3


async def test_broken_stream_is_unavailable(setup: Setup) -> None:
    setup.fake.script(StreamReply(setup.kit.opening(["Once ", "upon"]), ending="abort"))
    events, error = await collect_until_error(setup.provider, REQUEST)
    assert isinstance(error, ProviderUnavailable), repr(error)
    assert_secret_absent(error)
    assert text_of(events) == "Once upon", "what came before the break was delivered"
    assert len(setup.fake.requests) == 1, "a started stream is not retried"


@pytest.mark.parametrize(
    "garbage",
    [
        "data: {not json\n\n",
        'data: ["a", "list"]\n\n',
        'data: {"choices": 5, "type": "content_block_delta", "index": "x", "delta": 5}\n\n',
    ],
)
async def test_garbage_in_stream_is_bad_response(setup: Setup, garbage: str) -> None:
    # Anthropic events are named; the SDK skips unnamed data lines.
    frame = raw(garbage if setup.kit.name == "openai" else f"event: content_block_delta\n{garbage}")
    setup.fake.script(StreamReply([*setup.kit.opening(["ok"]), frame]))
    events, error = await collect_until_error(setup.provider, REQUEST)
    assert isinstance(error, ProviderBadResponse), repr(error)
    assert_secret_absent(error)
    assert text_of(events) == "ok"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("overloaded", ProviderUnavailable),
        ("rate_limit", ProviderRateLimited),
        ("auth", ProviderAuthError),
        ("invalid_request_error", ProviderBadResponse),
        ("", ProviderUnavailable),
    ],
)
async def test_error_event_mid_stream(
    setup: Setup, kind: str, expected: type[ProviderError]
) -> None:
    type_ = {
        "overloaded": setup.kit.overloaded_type,
        "rate_limit": setup.kit.rate_limit_type,
        "auth": setup.kit.auth_type,
    }.get(kind, kind)
    frame = setup.kit.error_event(type_, f"stream failed for key {FAKE_KEY}")
    setup.fake.script(StreamReply([*setup.kit.opening(["Once"]), frame]))
    events, error = await collect_until_error(setup.provider, REQUEST)
    assert type(error) is expected, repr(error)
    assert_secret_absent(error)
    assert text_of(events) == "Once"
    assert "error in the stream" in str(error)


# -- the consumer stops: the HTTP stream must close promptly ----------------------


def _long_stream(kit: Kit) -> StreamReply:
    words = [f"word{i} " for i in range(200)]
    return StreamReply(kit.opening(words), frame_delay=0.05, ending="hang")


async def test_aclose_mid_stream_closes_http_stream(setup: Setup) -> None:
    setup.fake.script(_long_stream(setup.kit))
    stream = setup.provider.stream(REQUEST)
    received = []
    async for event in stream:
        received.append(event)
        if len(received) == 3:
            break
    stopped = time.monotonic()
    await stream.aclose()
    disconnect = await setup.fake.wait_disconnect(within=1.0)
    assert disconnect.at - stopped < 1.0
    assert disconnect.frames_sent < 50, "the server did not stream everything"
    assert setup.fake.completed == []


async def test_aclosing_context_closes_http_stream(setup: Setup) -> None:
    setup.fake.script(_long_stream(setup.kit))
    async with contextlib.aclosing(setup.provider.stream(REQUEST)) as stream:
        async for event in stream:
            assert isinstance(event, TextDelta)
            break
    stopped = time.monotonic()
    disconnect = await setup.fake.wait_disconnect(within=1.0)
    assert disconnect.at - stopped < 1.0


async def test_cancelled_consumer_closes_http_stream(setup: Setup) -> None:
    setup.fake.script(_long_stream(setup.kit))
    first_event = asyncio.Event()

    async def consume() -> None:
        async for _ in setup.provider.stream(REQUEST):
            first_event.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_event.wait(), 5)
    task.cancel()
    stopped = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await task
    disconnect = await setup.fake.wait_disconnect(within=1.0)
    assert disconnect.at - stopped < 1.0


async def test_cancel_while_waiting_for_headers(setup: Setup) -> None:
    """Cancelled before the stream started (the server is slow to answer)."""
    setup.fake.script(StreamReply([raw(": slow\n\n", delay=10)]))
    task = asyncio.create_task(collect(setup.provider, REQUEST))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await setup.fake.wait_disconnect(within=1.0)


# -- keys never shown -------------------------------------------------------------


async def test_provider_repr_hides_key(setup: Setup) -> None:
    for text in (repr(setup.provider), str(setup.provider)):
        assert FAKE_KEY not in text
        assert setup.kit.name.capitalize()[:5] in text or "Provider" in text


async def test_key_sent_to_server(setup: Setup) -> None:
    setup.fake.script(setup.kit.ok(["ok"]))
    await collect(setup.provider, REQUEST)
    headers = setup.fake.requests[0].headers
    assert FAKE_KEY in (headers.get("x-api-key"), headers.get("authorization", "")[7:])


# -- helpers on their own ---------------------------------------------------------


class _Headers(dict[str, str]):
    pass


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after": " 12 "}, 12.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "7", "retry-after-ms": "1500"}, 7.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-3"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(_Headers(headers)) == expected


def test_parse_retry_after_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    seconds = parse_retry_after({"retry-after": when})
    assert seconds is not None and 25 <= seconds <= 31
    past = email.utils.formatdate(time.time() - 30, usegmt=True)
    assert parse_retry_after({"retry-after": past}) == 0.0


def test_redactor() -> None:
    redactor = Redactor.for_config(FAKE_KEY, {"api-key": "azure-secret-1", "X-Trace": "visible"})
    text = f"key {FAKE_KEY} and azure-secret-1 and visible"
    assert redactor.clean(text) == "key [redacted] and [redacted] and visible"
    assert FAKE_KEY not in repr(redactor)
    assert Redactor([""]).clean("unchanged") == "unchanged"


def test_error_body_fields() -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": " Over\nloaded "}}
    assert error_type(body) == "overloaded_error"
    assert error_detail(body) == "Over loaded"
    assert error_type({"error": {"code": "rate_limit_exceeded", "message": "m"}}) == (
        "rate_limit_exceeded"
    )
    assert error_detail("x" * 1000).endswith("…")
    assert error_detail(None, "fallback") == "fallback"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"type": "error", "error": {"type": "overloaded_error", "message": "m"}},
            ProviderUnavailable,
        ),
        ({"type": "error", "error": {"type": "api_error", "message": "m"}}, ProviderUnavailable),
        ({"message": "m", "type": "server_error"}, ProviderUnavailable),
        (
            {"error": {"message": "m", "type": "requests", "code": "rate_limit_exceeded"}},
            ProviderRateLimited,
        ),
        ({"error": {"type": "permission_error", "message": "m"}}, ProviderAuthError),
        # vLLM: {"object": "error", "type": "BadRequestError", "code": 400}
        (
            {"error": {"object": "error", "message": "m", "type": "BadRequestError", "code": 400}},
            ProviderBadResponse,
        ),
        ({"error": {"message": "m", "code": 429}}, ProviderRateLimited),
        ({"error": {"message": "m", "code": 503}}, ProviderUnavailable),
        ({"error": {"message": "m", "code": 422}}, ProviderBadResponse),
        ({"error": "just text"}, ProviderUnavailable),
        (None, ProviderUnavailable),
    ],
)
def test_stream_error_classification(body: object, expected: type[ProviderError]) -> None:
    error = stream_error("p", body, Redactor([]))
    assert type(error) is expected
    assert str(error).startswith("p: error in the stream")


def test_redactor_takes_the_token_of_an_authorization_header() -> None:
    redactor = Redactor.for_config("", {"Authorization": "Bearer tok-123456789"})
    assert redactor.clean("Bearer tok-123456789 / tok-123456789") == "[redacted] / [redacted]"
    assert redactor.clean("a Bearer scheme") == "a Bearer scheme"

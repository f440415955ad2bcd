"""Small helpers for provider tests."""

from __future__ import annotations

import traceback

from contextd.providers.base import ModelEvent, ModelRequest, Provider, TextDelta

# Recognizable, so a leak is easy to find; never a real key.
FAKE_KEY = "sk-test-DO-NOT-LEAK-7f3a9c2e5b1d"


async def collect(provider: Provider, request: ModelRequest) -> list[ModelEvent]:
    return [event async for event in provider.stream(request)]


async def collect_until_error(
    provider: Provider, request: ModelRequest
) -> tuple[list[ModelEvent], BaseException]:
    """The events delivered before the stream failed, and the failure."""
    events: list[ModelEvent] = []
    try:
        async for event in provider.stream(request):
            events.append(event)
    except Exception as exc:
        return events, exc
    raise AssertionError(f"the stream did not fail; events: {events}")


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def assert_secret_absent(exc: BaseException, secret: str = FAKE_KEY) -> None:
    """The secret is in no text the exception can show: str, repr, args, traceback, chain."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        for text in (str(current), repr(current), repr(current.args)):
            assert secret not in text, f"secret leaked in {type(current).__name__}: {text}"
        for value in vars(current).values():
            assert secret not in repr(value), f"secret leaked in an attribute: {value!r}"
        current = current.__cause__ or current.__context__
    formatted = "".join(traceback.format_exception(exc))
    assert secret not in formatted, "secret leaked in the formatted traceback"

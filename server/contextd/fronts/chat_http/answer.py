"""A started native turn answered over HTTP, whatever the protocol: whole, as one JSON
body once the turn ended, or streamed, as server-sent events while it runs. A protocol
gives only how its answer and its events are written (Answer, EventStream)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from aiohttp import web

from contextd.fronts.chat_http.failure import HttpFailure
from contextd.fronts.chat_http.front import TurnCall, json_text, turn_completed
from contextd.fronts.chat_http.params import ParamMap
from contextd.v1 import chat_pb2 as cpb


class Answer(Protocol):
    """One protocol's answer to one turn, as a whole."""

    def headers(self) -> dict[str, str]: ...

    def failure(self, done: cpb.TurnCompleted) -> HttpFailure | None:
        """The error of a turn that ended without an answer; None when it has one."""

    def whole(self, done: cpb.TurnCompleted) -> dict[str, Any]: ...


class EventStream(Protocol):
    """One protocol's events of one turn, each method the bytes of one write (empty:
    nothing to write)."""

    def opening(self) -> bytes: ...

    def delta(self, text: str) -> bytes: ...

    def failed(self, failure: HttpFailure) -> bytes:
        """The events that end a stream with ``failure`` (too late for a status)."""

    def closing(self, done: cpb.TurnCompleted) -> bytes: ...


def events(named: Iterable[tuple[str | None, dict[str, Any]]]) -> bytes:
    """Server-sent events, each ``(name, data)``; a None name writes the data alone."""
    text = "".join(
        (f"event: {name}\n" if name is not None else "") + f"data: {json_text(data)}\n\n"
        for name, data in named
    )
    return text.encode()


async def write_answer(
    request: web.Request,
    cors: dict[str, str],
    call: TurnCall,
    params: ParamMap,
    answer: Answer,
    stream: EventStream | None,
    answered: Callable[[], Awaitable[None]] | None = None,
) -> web.StreamResponse:
    """The turn's answer: whole, or as ``stream``'s events when given; ``answered``
    runs once the turn has an answer, before its end is written."""
    if stream is None:
        done = await turn_completed(call, params, on_delta=None)
        failure = answer.failure(done)
        if failure is not None:
            raise failure
        if answered is not None:
            await answered()
        return web.Response(
            text=json_text(answer.whole(done)),
            content_type="application/json",
            headers={**cors, **answer.headers()},
        )
    response = web.StreamResponse(
        headers={
            **cors,
            **answer.headers(),
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
        }
    )
    await response.prepare(request)
    await response.write(stream.opening())

    async def on_delta(text: str) -> None:
        written = stream.delta(text)
        if written:
            await response.write(written)

    try:
        done = await turn_completed(call, params, on_delta)
    except HttpFailure as error:
        # Too late for a status: the SDKs raise an error event as the call's error.
        await response.write(stream.failed(error))
        return response
    failure = answer.failure(done)
    if failure is not None:
        await response.write(stream.failed(failure))
        return response
    if answered is not None:
        await answered()
    await response.write(stream.closing(done))
    await response.write_eof()
    return response

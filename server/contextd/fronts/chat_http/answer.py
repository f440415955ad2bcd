"""A model API's request answered over HTTP, whatever the protocol. A started native
turn: whole, as one JSON body once the turn ended, or streamed, as server-sent events
while it runs; a protocol gives only how its answer and its events are written (Answer,
EventStream). Any other request: one JSON object, or the failure in the protocol's
shape."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
from aiohttp import web

from contextd.fronts.chat_http.failure import HttpFailure
from contextd.fronts.chat_http.front import ModelFront, TurnCall, json_text, turn_completed
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


async def json_answer(
    front: ModelFront, request: web.Request, answer: Callable[[], Awaitable[object]]
) -> web.Response:
    """The JSON object ``answer`` gives, or its HttpFailure in ``front``'s shape; with
    the CORS headers, counted in the web port's metrics."""
    cors = front.cors(request)
    if isinstance(cors, web.Response):
        return cors
    code = grpc.StatusCode.OK
    try:
        return web.json_response(await answer(), headers=cors)
    except HttpFailure as failure:
        code = failure.metric_code
        return front.error_response(failure, cors)
    finally:
        front.count(code)


def events(named: Iterable[tuple[str | None, dict[str, Any]]]) -> bytes:
    """Server-sent events, each ``(name, data)``; a None name writes the data alone."""
    text = "".join(
        (f"event: {name}\n" if name is not None else "") + f"data: {json_text(data)}\n\n"
        for name, data in named
    )
    return text.encode()


# What answers a started turn (the request, the turn's start): its Answer, and its
# EventStream when it is streamed.
Answering = Callable[[web.Request, cpb.TurnStarted], Awaitable[tuple[Answer, EventStream | None]]]


@dataclass
class AnsweredTurn:
    """A request translated into a native turn (front.TurnRequest), answered whole or
    streamed as ``answering`` says."""

    native: cpb.StreamChatRequest
    params: ParamMap
    answering: Answering

    async def answer(
        self, request: web.Request, cors: dict[str, str], call: TurnCall, started: cpb.TurnStarted
    ) -> web.StreamResponse:
        answer, stream = await self.answering(request, started)
        if stream is None:
            done = await turn_completed(call, self.params, on_delta=None)
            failure = answer.failure(done)
            if failure is not None:
                raise failure
            return web.Response(
                text=json_text(answer.whole(done)),
                content_type="application/json",
                headers={**cors, **answer.headers()},
            )
        return await self._stream(request, cors, call, answer, stream)

    async def _stream(
        self,
        request: web.Request,
        cors: dict[str, str],
        call: TurnCall,
        answer: Answer,
        stream: EventStream,
    ) -> web.StreamResponse:
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
            done = await turn_completed(call, self.params, on_delta)
        except HttpFailure as error:
            # Too late for a status: the SDKs raise an error event as the call's error.
            await response.write(stream.failed(error))
            return response
        failure = answer.failure(done)
        if failure is not None:
            await response.write(stream.failed(failure))
            return response
        await response.write(stream.closing(done))
        await response.write_eof()
        return response

"""A scriptable local HTTP server for provider tests (aiohttp, 127.0.0.1, free port).

A test scripts the replies, one per request in order (``script``): a
``StreamReply`` (status, headers, SSE frames each with an optional delay, and
how the body ends) or a ``JSONReply`` (status, JSON body, headers). The server
records every request (path, query, headers, JSON body) and every client that
went away before its stream ended (``disconnects``, with the time, so a test can
check that a provider closed its stream promptly once its consumer stopped).

Format builders for the two providers live in ``openai_sse`` and
``anthropic_sse``; this module only knows frames.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web


@dataclass(frozen=True)
class Frame:
    """Bytes written as they are, after ``delay`` seconds (else the reply's ``frame_delay``)."""

    data: bytes
    delay: float | None = None


def sse(data: object, *, event: str | None = None, delay: float | None = None) -> Frame:
    """One server-sent event; ``data`` JSON-encoded unless it is a str."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    lines = [f"event: {event}"] if event else []
    lines += [f"data: {line}" for line in text.split("\n")]
    return Frame(("\n".join(lines) + "\n\n").encode(), delay)


def raw(text: str, *, delay: float | None = None) -> Frame:
    return Frame(text.encode(), delay)


Ending = Literal["close", "abort", "hang"]


@dataclass
class StreamReply:
    """An ``text/event-stream`` answer.

    ``ending``: ``close`` ends the body properly; ``abort`` cuts the connection
    without finishing the chunked body (a broken stream); ``hang`` keeps the
    stream open without sending more until the client goes away.
    """

    frames: list[Frame]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    frame_delay: float = 0.0
    ending: Ending = "close"


@dataclass
class JSONReply:
    status: int
    body: object
    headers: dict[str, str] = field(default_factory=dict)


Reply = StreamReply | JSONReply


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # names lower-cased
    body: Any  # parsed JSON, or the text when it is not JSON
    at: float  # time.monotonic()
    raw: str = ""  # the body as sent


@dataclass
class Disconnect:
    request_index: int
    frames_sent: int
    at: float  # time.monotonic()


class FakeLLMServer:
    """Serves the scripted replies to POSTs on any path."""

    def __init__(self, *, base_path: str = "") -> None:
        self.base_path = base_path
        self.requests: list[RecordedRequest] = []
        self.disconnects: list[Disconnect] = []
        self.completed: list[int] = []  # request indexes whose stream ended as scripted
        self._replies: list[Reply] = []
        self._repeat_last = False
        self._disconnected = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- scripting ---------------------------------------------------------
    def script(self, *replies: Reply, repeat_last: bool = False) -> None:
        """Replies for the next requests, in order; ``repeat_last`` serves the last one forever."""
        self._replies = list(replies)
        self._repeat_last = repeat_last

    def _next_reply(self) -> Reply:
        if not self._replies:
            return JSONReply(500, {"error": {"message": "fake: no reply scripted"}})
        if len(self._replies) == 1 and self._repeat_last:
            return self._replies[0]
        return self._replies.pop(0)

    # -- lifecycle ---------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.base_path}"

    async def start(self) -> FakeLLMServer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # handler_cancellation: a client that goes away cancels its handler at once.
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeLLMServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- observing ---------------------------------------------------------
    async def wait_disconnect(self, within: float) -> Disconnect:
        """The first recorded disconnect, waiting up to ``within`` seconds for one."""
        await asyncio.wait_for(self._disconnected.wait(), within)
        return self.disconnects[0]

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    # -- serving -----------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        text = (await request.read()).decode("utf-8", "replace")
        try:
            body: Any = json.loads(text) if text else None
        except ValueError:
            body = text
        index = len(self.requests)
        self.requests.append(
            RecordedRequest(
                method=request.method,
                path=request.path,
                query=dict(request.query),
                headers={k.lower(): v for k, v in request.headers.items()},
                body=body,
                at=time.monotonic(),
                raw=text,
            )
        )
        reply = self._next_reply()
        if isinstance(reply, JSONReply):
            return web.json_response(reply.body, status=reply.status, headers=reply.headers)
        return await self._stream(request, index, reply)

    async def _stream(
        self, request: web.Request, index: int, reply: StreamReply
    ) -> web.StreamResponse:
        headers: Mapping[str, str] = {
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            **reply.headers,
        }
        response = web.StreamResponse(status=reply.status, headers=headers)
        sent = 0
        try:
            await response.prepare(request)
            for frame in reply.frames:
                delay = reply.frame_delay if frame.delay is None else frame.delay
                if delay:
                    await self._wait(request, delay)
                await response.write(frame.data)
                sent += 1
            if reply.ending == "abort":
                transport = request.transport
                assert transport is not None
                transport.abort()
                self.completed.append(index)
                return response
            if reply.ending == "hang":
                await self._wait(request, 3600)
            await response.write_eof()
            self.completed.append(index)
            return response
        except (asyncio.CancelledError, ConnectionError):
            self.disconnects.append(Disconnect(index, sent, time.monotonic()))
            self._disconnected.set()
            raise

    @staticmethod
    async def _wait(request: web.Request, seconds: float) -> None:
        """Sleeps, but notices at once when the client has gone."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            transport = request.transport
            if transport is None or transport.is_closing():
                raise ConnectionResetError("client went away")
            await asyncio.sleep(min(left, 0.01))

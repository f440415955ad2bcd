"""How the web port keeps to its share of the request limits (fronts.limits): its
connections, the time a request body may take to arrive, and the request bytes buffered
across every call.

Each call's body is read whole before it is forwarded (gRPC-Web and Connect send a
unary or server-streaming request as one body), so without these a client could hold
memory by opening connections and sending bodies slowly. A connection beyond the cap is
answered ``503`` and closed before anything is read; a body that takes too long or does
not fit the shared budget ends the call with a status, and its connection is closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web

_BUSY_TEXT = b"too many connections; retry shortly\n"
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Retry-After: 1\r\n"
    b"Content-Type: text/plain\r\n"
    b"Content-Length: %d\r\n"
    b"Connection: close\r\n"
    b"\r\n"
    b"%s"
) % (len(_BUSY_TEXT), _BUSY_TEXT)


class BodyBudget:
    """Request bytes held by the calls in flight, against one limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> bool:
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give_back(self, size: int) -> None:
        self.held -= size


class _Busy(asyncio.Protocol):
    """A connection over the cap: answered at once and closed, nothing read."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(_BUSY)
        transport.close()


def capped_connections(
    server: web.Server, max_connections: int
) -> Callable[[], asyncio.BaseProtocol]:
    """A protocol factory for ``loop.create_server``: aiohttp's own handler while fewer
    than ``max_connections`` are open, else one that refuses."""

    def accept() -> asyncio.BaseProtocol:
        if len(server.connections) >= max_connections:
            return _Busy()
        return server()

    return accept

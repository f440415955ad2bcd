"""A counting relay between contextd and PostgreSQL: it passes every byte on and counts what
the clients send in PostgreSQL's protocol, so that tests and benchmarks see the round trips
a call makes, whatever statements they are.

A round trip is a message the client then waits on: a ``Sync`` (which ends an extended
query: asyncpg's prepared statements, one per statement; pipelined statements share one)
or a simple ``Query`` (asyncpg's BEGIN and COMMIT). Statements are the ``Execute`` and
``Query`` messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

# Untyped first messages: SSLRequest, GSSENCRequest and CancelRequest carry these codes; a
# StartupMessage carries the protocol version, after which every message is typed.
_BEFORE_STARTUP = {80877103, 80877104, 80877102}


@dataclass
class Counts:
    round_trips: int = 0
    statements: int = 0
    # time.monotonic() of the last message a client sent.
    last_sent: float = field(default_factory=time.monotonic)


class RoundTripRelay:
    """Listens on a free loopback port, relays to ``host:port``; ``counts`` so far."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self.counts = Counts()
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> RoundTripRelay:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def snapshot(self) -> tuple[int, int]:
        return self.counts.round_trips, self.counts.statements

    def wait_quiet(self, seconds: float = 0.5, at_most: float = 15.0) -> None:
        """Wait until no client sent anything for ``seconds`` (background work done)."""
        give_up = time.monotonic() + at_most
        while time.monotonic() < give_up:
            if time.monotonic() - self.counts.last_sent >= seconds:
                return
            time.sleep(seconds / 4)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        back = asyncio.ensure_future(_pipe(up_reader, writer))
        try:
            await self._forward(reader, up_writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client or the server went, or the relay stops
        finally:
            back.cancel()
            for w in (writer, up_writer):
                with contextlib.suppress(Exception):
                    w.close()

    async def _forward(self, reader: asyncio.StreamReader, up: asyncio.StreamWriter) -> None:
        while True:  # untyped messages until the StartupMessage
            head = await reader.readexactly(8)
            length, code = struct.unpack("!ii", head)
            up.write(head + await reader.readexactly(length - 8))
            await up.drain()
            if code not in _BEFORE_STARTUP:
                break
        counts = self.counts
        while True:
            head = await reader.readexactly(5)
            kind = head[:1]
            (length,) = struct.unpack("!i", head[1:])
            up.write(head + await reader.readexactly(length - 4))
            if kind in (b"S", b"Q"):
                counts.round_trips += 1
                await up.drain()
            if kind in (b"E", b"Q"):
                counts.statements += 1
            counts.last_sent = time.monotonic()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, asyncio.CancelledError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()


@contextlib.contextmanager
def counting_relay(host: str, port: int) -> Iterator[RoundTripRelay]:
    relay = RoundTripRelay(host, port).start()
    try:
        yield relay
    finally:
        relay.stop()

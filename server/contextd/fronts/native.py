"""A native method called in the server's own process, as the HTTP model APIs call
``StreamChat``: the same guard as a call on the native port decides it (credential,
tenant, limits, audit line, metrics, trace), and it reads and fails as a call over a
channel does (its messages, then its end; ``grpc.aio.AioRpcError`` with the status of
a call that failed), without a loopback channel serialising each message, framing it over
HTTP/2 and parsing it back. The native API (fronts/grpc/in_process.py) provides it; the
composition root hands it to the web port."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from google.protobuf.message import Message


class NativeStream(Protocol):
    """A server-streaming call in progress."""

    async def read(self) -> Message | None:
        """The next message; None once the call has ended well. Raises
        ``grpc.aio.AioRpcError`` with the status of a call that failed."""
        ...

    async def aclose(self) -> None:
        """End the call: one not yet at its end is cancelled, as a client's cancel does."""
        ...


class InProcess(Protocol):
    """The native methods, called in process."""

    def stream(
        self, method: str, request: Message, metadata: Sequence[tuple[str, str]], peer: str
    ) -> NativeStream:
        """A call of the server-streaming ``method`` (``/package.Service/Method``) with
        ``metadata`` (the credential and trace context, as a channel would send them),
        from ``peer`` (the client's address, as grpc names it: ``ipv4:host:port``)."""
        ...

"""What the gateway's protocols share: the forwarded native call, and the interface each
protocol (gRPC-Web, Connect) implements to read a request and write its response."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

import grpc
import grpc.aio
from aiohttp import web
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import MethodDescriptor

Metadata = list[tuple[str, str | bytes]]


@dataclass(frozen=True, slots=True)
class Outcome:
    code: grpc.StatusCode
    details: str
    trailing_metadata: Metadata


class CallError(Exception):
    """A request the gateway refuses before forwarding it, with the status to answer."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def outcome(self) -> Outcome:
        return Outcome(self.code, self.message, [])


def method_for(path: str) -> MethodDescriptor | None:
    """The method at ``/package.Service/Method``, if its descriptor is loaded (every
    service the native server registers is)."""
    service, _, name = path.strip("/").partition("/")
    try:
        found = descriptor_pool.Default().FindServiceByName(service)
    except KeyError:
        return None
    method: MethodDescriptor | None = found.methods_by_name.get(name)
    return method


class NativeCall:
    """One call forwarded to the native port as raw bytes.

    stream_stream fits every method kind: the native server takes the request messages
    it expects and answers with zero or more messages and a status, as for any client.
    """

    def __init__(
        self,
        channel: grpc.aio.Channel,
        path: str,
        messages: list[bytes],
        deadline_s: float | None,
        metadata: grpc.aio.Metadata,
    ) -> None:
        self._call = channel.stream_stream(path, None, None)(
            iter(messages), timeout=deadline_s, metadata=metadata
        )
        # The status the client was answered with, once the exchange read it.
        self.code: grpc.StatusCode | None = None

    async def initial_metadata(self) -> Metadata:
        return list(await self._call.initial_metadata() or ())

    async def responses(self) -> AsyncIterator[bytes]:
        try:
            async for message in self._call:
                yield message
        except grpc.aio.AioRpcError:
            return  # the outcome says why

    async def outcome(self) -> Outcome:
        self.code = await self._call.code()
        return Outcome(
            self.code,
            await self._call.details() or "",
            list(await self._call.trailing_metadata() or ()),
        )

    def cancel(self) -> None:
        """Cancel unless finished: a client that went away cancels the call, as a native
        client's disconnect would."""
        if not self._call.done():
            self._call.cancel()


class Exchange(abc.ABC):
    """One HTTP request and its response, in one protocol."""

    protocol: str  # its name in the web port's metrics

    def __init__(self, request: web.Request, cors_headers: dict[str, str]) -> None:
        self.request = request
        self.cors_headers = cors_headers

    def body_limit(self, max_body: int) -> int:
        """The largest request body to read, for messages up to ``max_body`` bytes."""
        return max_body

    @abc.abstractmethod
    def messages(self, body: bytes) -> list[bytes]:
        """The request messages, serialized protobuf (raises CallError)."""

    @abc.abstractmethod
    def deadline(self) -> float | None:
        """Seconds the call may take, from the protocol's timeout header."""

    @abc.abstractmethod
    async def respond(self, call: NativeCall) -> web.StreamResponse:
        """Relay the call's answer."""

    @abc.abstractmethod
    async def refuse(self, error: CallError) -> web.StreamResponse:
        """Answer with ``error``'s status; nothing was forwarded."""

    async def start(
        self, status: int, content_type: str, headers: Iterable[tuple[str, str]]
    ) -> web.StreamResponse:
        """Send the response's status and headers (the CORS ones included); the body
        follows with ``write``."""
        response = web.StreamResponse(status=status)
        response.content_type = content_type
        response.headers.update(self.cors_headers)
        for name, value in headers:
            response.headers.add(name, value)
        await response.prepare(self.request)
        return response

"""The gRPC-Web port: an HTTP/1.1 server that forwards each call, as raw bytes, to the
native gRPC port over a loopback channel.

Every call therefore runs through the same servicers, interceptor, limits and logging
as a native one, and its status, details and metadata come back byte for byte. The
gateway only translates framing: the request body's frames become the call's messages,
the call's messages become response frames, its status and trailing metadata the
trailer frame.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

import grpc
import grpc.aio
from aiohttp import web

from contextd.web import framing
from contextd.web.cors import CorsPolicy

log = logging.getLogger("contextd.web")

_CONTENT_TYPES = {
    "application/grpc-web": False,
    "application/grpc-web+proto": False,
    "application/grpc-web-text": True,
    "application/grpc-web-text+proto": True,
}
_METHOD_PATH = re.compile(r"/[A-Za-z_][\w.]*/[A-Za-z_]\w*")
_METADATA_KEY = re.compile(r"[0-9a-z_.-]+")
# Request headers that belong to HTTP, the browser or the gRPC-Web protocol itself,
# not to the call's metadata.
_NOT_METADATA = frozenset(
    {
        "accept",
        "accept-encoding",
        "accept-language",
        "cache-control",
        "connection",
        "content-length",
        "content-type",
        "cookie",
        "host",
        "keep-alive",
        "origin",
        "pragma",
        "referer",
        "te",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "x-grpc-web",
        "x-user-agent",
    }
)
_NOT_METADATA_PREFIXES = ("grpc-", "sec-", "access-control-", "proxy-")
_READ_CHUNK = 64 * 1024
# Room for frame headers on top of the largest message, so an oversized message still
# reaches the native server and fails there exactly as it would natively.
_BODY_SLACK = 64 * 1024


@dataclass(frozen=True, slots=True)
class _Failure:
    code: grpc.StatusCode
    message: str


class WebGateway:
    """Serve gRPC-Web on ``host:port`` for the native server at ``target``."""

    def __init__(
        self, target: str, cors: CorsPolicy, max_message_bytes: int, shutdown_timeout: float
    ) -> None:
        self._cors = cors
        self._max_body = max_message_bytes + _BODY_SLACK
        # No size limits of its own: the native server enforces --max-message-bytes on
        # requests and responses, with its own status.
        self._channel = grpc.aio.insecure_channel(
            target,
            options=[
                ("grpc.max_send_message_length", -1),
                ("grpc.max_receive_message_length", -1),
            ],
        )
        app = web.Application()
        app.router.add_route("OPTIONS", "/{tail:.*}", self._preflight)
        app.router.add_route("POST", "/{tail:.*}", self._call)
        # Cancel a call's handler when its client disconnects: that cancels the
        # forwarded call, as closing a native stream does.
        self._runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=shutdown_timeout
        )

    async def start(self, host: str, port: int) -> int:
        """Listen; return the bound port (``port`` 0 picks a free one)."""
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, host, port).start()
        except OSError as error:
            await self.aclose()
            raise SystemExit(f"cannot listen for gRPC-Web on {host}:{port}: {error}") from None
        return int(self._runner.addresses[0][1])

    async def aclose(self) -> None:
        """Refuse new connections, give the calls in flight up to ``shutdown_timeout``
        (they end when the native server stops), then close the channel."""
        await self._runner.cleanup()
        await self._channel.close(None)

    # -- handlers ----------------------------------------------------------------------

    async def _preflight(self, request: web.Request) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is None or not self._cors.allows(origin):
            log.info("cors preflight refused", extra={"origin": origin, "path": request.path})
            return web.Response(status=403)
        requested = request.headers.get("Access-Control-Request-Headers", "")
        return web.Response(status=204, headers=self._cors.preflight_headers(origin, requested))

    async def _call(self, request: web.Request) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is not None and not self._cors.allows(origin):
            # A browser would hide the answer, but the call would still have run.
            log.info("cross-origin call refused", extra={"origin": origin, "path": request.path})
            return web.Response(status=403, text="origin not allowed\n")
        text = _CONTENT_TYPES.get(request.content_type)
        if text is None:
            return web.Response(
                status=415, text="use application/grpc-web(+proto) or application/grpc-web-text\n"
            )
        if not _METHOD_PATH.fullmatch(request.path):
            return web.Response(status=404, text="not a gRPC method path\n")
        response = web.StreamResponse(status=200)
        response.content_type = request.content_type
        if origin is not None:
            response.headers.update(self._cors.response_headers(origin))
        writer = _FrameWriter(request, response, text)
        messages = await self._read_messages(request, text)
        if isinstance(messages, _Failure):
            await writer.finish(messages.code, messages.message, ())
            return response
        try:
            timeout, metadata = _timeout(request), _metadata(request)
        except ValueError as error:
            await writer.finish(grpc.StatusCode.INVALID_ARGUMENT, str(error), ())
            return response
        await self._forward(request.path, messages, timeout, metadata, writer)
        return response

    async def _forward(
        self,
        path: str,
        messages: list[bytes],
        deadline_s: float | None,
        metadata: grpc.aio.Metadata,
        writer: _FrameWriter,
    ) -> None:
        # stream_stream fits every method kind: the native server takes the request
        # messages it expects and answers with zero or more messages and a status.
        call = self._channel.stream_stream(path, None, None)(
            iter(messages), timeout=deadline_s, metadata=metadata
        )
        try:
            await writer.start(await call.initial_metadata())
            try:
                async for message in call:
                    await writer.message(message)
            except grpc.aio.AioRpcError:
                pass  # the status, details and trailers are read below
            await writer.finish(
                await call.code(), await call.details() or "", await call.trailing_metadata()
            )
        finally:
            # The client went away (the handler is cancelled, or a write fails): cancel
            # the call as a native client's disconnect would.
            if not call.done():
                call.cancel()

    async def _read_messages(self, request: web.Request, text: bool) -> list[bytes] | _Failure:
        limit = self._max_body * 4 // 3 + 4 if text else self._max_body
        if (request.content_length or 0) > limit:
            return _too_large(limit)
        body = bytearray()
        while chunk := await request.content.read(_READ_CHUNK):
            body += chunk
            if len(body) > limit:
                return _too_large(limit)
        try:
            frames = framing.decode_frames(framing.decode_text(body) if text else bytes(body))
        except framing.FramingError as error:
            return _Failure(grpc.StatusCode.INTERNAL, f"malformed gRPC-Web request: {error}")
        if any(flags != framing.MESSAGE for flags, _ in frames):
            return _Failure(
                grpc.StatusCode.UNIMPLEMENTED,
                "compressed or flagged request frames are not supported",
            )
        return [payload for _, payload in frames]


class _FrameWriter:
    """Writes the response: headers from the call's initial metadata, then message
    frames, then the trailer frame; base64 throughout in text mode."""

    def __init__(self, request: web.Request, response: web.StreamResponse, text: bool) -> None:
        self._request = request
        self._response = response
        self._text = framing.TextEncoder() if text else None

    async def start(self, initial_metadata: Iterable[tuple[str, str | bytes]] | None) -> None:
        for key, value in initial_metadata or ():
            self._response.headers.add(key, _header_value(key, value))
        await self._response.prepare(self._request)

    async def message(self, payload: bytes) -> None:
        await self._write(framing.encode_frame(framing.MESSAGE, payload))

    async def finish(
        self,
        code: grpc.StatusCode,
        details: str,
        trailing_metadata: Iterable[tuple[str, str | bytes]] | None,
    ) -> None:
        if not self._response.prepared:
            await self._response.prepare(self._request)
        trailers = [("grpc-status", str(code.value[0]))]
        if details:
            trailers.append(("grpc-message", framing.percent_encode(details)))
        trailers += [(key, _header_value(key, value)) for key, value in trailing_metadata or ()]
        await self._write(framing.encode_trailers(trailers))
        if self._text is not None:
            await self._response.write(self._text.flush())
        await self._response.write_eof()

    async def _write(self, data: bytes) -> None:
        await self._response.write(data if self._text is None else self._text.encode(data))


def _too_large(limit: int) -> _Failure:
    return _Failure(grpc.StatusCode.RESOURCE_EXHAUSTED, f"request body larger than {limit} bytes")


def _timeout(request: web.Request) -> float | None:
    raw = request.headers.get("grpc-timeout")
    return None if raw is None else framing.parse_timeout(raw)


def _metadata(request: web.Request) -> grpc.aio.Metadata:
    """The call's metadata: every request header that is not about HTTP or gRPC-Web
    itself; ``-bin`` values are base64 on the wire and bytes to grpc."""
    metadata = grpc.aio.Metadata()
    for name, value in request.headers.items():
        key = name.lower()
        if (
            key in _NOT_METADATA
            or key.startswith(_NOT_METADATA_PREFIXES)
            or not _METADATA_KEY.fullmatch(key)
        ):
            continue
        if key.endswith("-bin"):
            try:
                metadata.add(key, base64.b64decode(value + "=" * (-len(value) % 4), validate=True))
            except binascii.Error:
                raise ValueError(f"header {key} is not base64") from None
        else:
            metadata.add(key, value)
    return metadata


def _header_value(key: str, value: str | bytes) -> str:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value

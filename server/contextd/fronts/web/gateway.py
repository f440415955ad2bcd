"""The web port: an HTTP/1.1 server that forwards each gRPC-Web or Connect call, as raw
bytes, to the native gRPC port over a loopback channel.

Every call therefore runs through the same servicers, interceptor, limits and logging
as a native one, and its status, details and metadata come back unchanged. The gateway
only translates the framing (see grpc_web.py and connect.py). The routes mounted beside
them (the model APIs) may also call native methods in process (``in_process``), behind
the same interceptor, where a turn's every message would otherwise cross the channel.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
from collections.abc import Callable, Iterable, Sequence

import grpc
import grpc.aio
from aiohttp import web

from contextd.core.errors import cut
from contextd.fronts.limits import RequestLimits
from contextd.fronts.listener import cannot_listen
from contextd.fronts.native import InProcess
from contextd.fronts.web import connect, grpc_web, healthz, inspector, metadata
from contextd.fronts.web.cors import CorsPolicy, is_own_origin
from contextd.fronts.web.exchange import CallError, Exchange, NativeCall, method_for
from contextd.fronts.web.limits import BodyBudget, capped_connections

log = logging.getLogger("contextd.web")

# Told of each call on the web port: its protocol and the status it was answered with.
CallCounter = Callable[[str, grpc.StatusCode], None]
# Routes of their own that a translator mounts on the web port, ahead of the gRPC-Web and
# Connect catch-all; built from the gateway, whose channel, limits and CORS policy they
# share (see WebGateway's public attributes).
Mount = Callable[["WebGateway"], Iterable[web.RouteDef]]

_METHOD_PATH = re.compile(r"/[A-Za-z_][\w.]*/[A-Za-z_]\w*")
_SUPPORTED = ", ".join([*grpc_web.CONTENT_TYPES, *connect.UNARY_TYPES, *connect.STREAM_TYPES])
_READ_CHUNK = 64 * 1024
# Room for frame headers on top of the largest message, so an oversized message still
# reaches the native server and fails there exactly as it would natively.
_BODY_SLACK = 64 * 1024
# The native answers' metadata a loopback client takes (grpc's default is 8 KiB).
NATIVE_METADATA_BYTES = 1024 * 1024


class BodyTooLarge(CallError):
    """A request body over the limit (told apart from the shared budget being full)."""


class WebGateway:
    """Serve gRPC-Web and Connect for the native server at ``target``; over HTTPS with
    ``ssl_context`` (which also says whether clients must present a certificate)."""

    def __init__(
        self,
        target: str,
        cors: CorsPolicy,
        limits: RequestLimits,
        shutdown_timeout: float,
        ssl_context: ssl.SSLContext | None = None,
        peer_key: str = "",
        peer_secret: str = "",
        health: healthz.HealthStatus | None = None,
        count: CallCounter | None = None,
        mounts: Sequence[Mount] = (),
        in_process: InProcess | None = None,
    ) -> None:
        """``peer_key``, ``peer_secret``: when given, each forwarded call carries
        ``peer_key: <peer_secret> <client address>``, so the native server can tell the
        web port's callers apart (it believes only a value with the secret). ``health``:
        when given, ``GET /healthz`` answers with it. ``count``: when given, told of
        each call's protocol and the status it was answered with. ``mounts``: routes
        of their own, served before the catch-all. ``in_process``: the native methods
        the mounted routes may call in process."""
        self.count = count
        self.in_process = in_process
        self.cors = cors
        self._peer = (peer_key, peer_secret) if peer_key and peer_secret else None
        self._ssl_context = ssl_context
        self.max_body = limits.max_message_bytes + _BODY_SLACK
        self._limits = limits
        self._budget = BodyBudget(limits.web_max_buffered_bytes)
        self._listener: asyncio.Server | None = None
        # No size limits of its own: the native server enforces --max-message-bytes on
        # requests and responses, with its own status; its trailers come through whole
        # (an error message may be longer than grpc's 8 KiB default for metadata).
        self.channel = grpc.aio.insecure_channel(
            target,
            options=[
                ("grpc.max_send_message_length", -1),
                ("grpc.max_receive_message_length", -1),
                ("grpc.max_metadata_size", NATIVE_METADATA_BYTES),
            ],
        )
        app = web.Application()
        if health is not None:
            # First, so that it answers every method on its path (other than GET and
            # HEAD with 405).
            app.router.add_route("*", healthz.PATH, healthz.handler(health))
        # The context inspector's page: its calls come back to this port's Connect API.
        app.router.add_routes(inspector.routes())
        for mount in mounts:
            app.router.add_routes(mount(self))
        app.router.add_route("OPTIONS", "/{tail:.*}", self._preflight)
        app.router.add_route("POST", "/{tail:.*}", self._call)
        # Cancel a call's handler when its client disconnects: that cancels the
        # forwarded call, as closing a native stream does.
        self._runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=shutdown_timeout
        )

    async def start(self, host: str, port: int, *, reuse_port: bool = False) -> int:
        """Listen; return the bound port (``port`` 0 picks a free one). ``reuse_port``:
        other processes of the same server listen on it too (SO_REUSEPORT)."""
        await self._runner.setup()
        assert self._runner.server is not None
        # Its own listener instead of aiohttp's TCPSite, to refuse connections over the cap.
        accept = capped_connections(self._runner.server, self._limits.web_max_connections)
        try:
            self._listener = await asyncio.get_running_loop().create_server(
                accept,
                host or None,
                port,
                ssl=self._ssl_context,
                reuse_address=True,
                reuse_port=reuse_port or None,
            )
        except OSError as error:
            await self.aclose()
            raise cannot_listen("the web port", host, port, error) from None
        return int(self._listener.sockets[0].getsockname()[1])

    async def aclose(self) -> None:
        """Refuse new connections, give the calls in flight up to ``shutdown_timeout``
        (they end when the native server stops), then close the channel."""
        if self._listener is not None:
            self._listener.close()
        await self._runner.cleanup()
        await self.channel.close(None)

    async def _preflight(self, request: web.Request) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is None or not self.cors.allows(origin):
            log.info("cors preflight refused", extra=_refused(origin, request.path))
            return web.Response(status=403)
        requested = request.headers.get("Access-Control-Request-Headers", "")
        # A page served from a public address asks before it may reach a private or
        # loopback one (an add-in calling a contextd on the user's machine).
        private_network = (
            request.headers.get("Access-Control-Request-Private-Network", "").lower() == "true"
        )
        headers = self.cors.preflight_headers(origin, requested, private_network)
        return web.Response(status=204, headers=headers)

    async def _call(self, request: web.Request) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is not None and is_own_origin(origin, request.scheme, request.host):
            origin = None  # a page of this port's own (the inspector): no CORS to answer
        if origin is not None and not self.cors.allows(origin):
            # A browser would hide the answer, but the call would still have run.
            log.info("cross-origin call refused", extra=_refused(origin, request.path))
            return web.Response(status=403, text="origin not allowed\n")
        if not _METHOD_PATH.fullmatch(request.path):
            return web.Response(status=404, text="not a gRPC method path\n")
        cors_headers = self.cors.response_headers(origin) if origin is not None else {}
        misfit = connect.refuse_misfit(request, cors_headers)
        if misfit is not None:
            return misfit
        exchange = _exchange(request, cors_headers)
        if exchange is None:
            return web.Response(status=415, text=f"content types: {_SUPPORTED}\n")
        body: bytes | None = None
        try:
            body = await self.read_body(request, exchange.body_limit(self.max_body))
            messages = exchange.messages(body)
            _require_a_message(request.path, messages)
            deadline_s = exchange.deadline()
            if deadline_s == 0:
                # grpc would read a zero timeout as none at all.
                raise CallError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
            call_metadata = _call_metadata(request)
            self.vouch_for_peer(request, call_metadata)
        except CallError as error:
            # aiohttp drains what is left of an unread body (for a few seconds at most)
            # so that the client can read this answer.
            if body is not None:
                self.release(body)
            if self.count is not None:
                self.count(exchange.protocol, error.code)
            return await exchange.refuse(error)
        call = NativeCall(self.channel, request.path, messages, deadline_s, call_metadata)
        try:
            return await exchange.respond(call)
        except ConnectionResetError:
            # The client went away while an answer was being written to it: the same as
            # the disconnect that cancels this handler when it is caught waiting, which
            # aiohttp takes as an ordinary end (its own write errors it logs as ERROR).
            raise asyncio.CancelledError from None
        finally:
            call.cancel()
            self.release(body)
            if self.count is not None:
                # No status read: the client went away before the call's end.
                self.count(exchange.protocol, call.code or grpc.StatusCode.CANCELLED)

    def vouch_for_peer(self, request: web.Request, call_metadata: grpc.aio.Metadata) -> None:
        """With a peer secret, tell the native server the client's address (a value the
        client sent under that key is not believed: it is replaced)."""
        if self._peer is None:
            return
        key, secret = self._peer
        if key in call_metadata:
            call_metadata.delete_all(key)
        call_metadata.add(key, f"{secret} {request.remote or ''}")

    def call_peer(self, request: web.Request) -> str:
        """The client's address as grpc names a caller's (``ipv4:host:port``)."""
        address = request.transport.get_extra_info("peername") if request.transport else None
        if not isinstance(address, tuple) or len(address) < 2:
            return "unknown"
        host, port = address[0], address[1]
        return f"ipv6:[{host}]:{port}" if ":" in str(host) else f"ipv4:{host}:{port}"

    def release(self, body: bytes) -> None:
        """Give a body read with ``read_body`` back to the shared budget."""
        self._budget.give_back(len(body))

    async def read_body(self, request: web.Request, limit: int) -> bytes:
        """The whole body, counted in the shared budget (given back with ``release``
        once the call ends) and within ``body_timeout``; raises CallError (BodyTooLarge
        over ``limit``)."""
        too_large = BodyTooLarge(
            grpc.StatusCode.RESOURCE_EXHAUSTED, f"request body larger than {limit} bytes"
        )
        if (request.content_length or 0) > limit:
            raise too_large
        body = bytearray()
        try:
            async with asyncio.timeout(self._limits.web_body_timeout):
                while chunk := await request.content.read(_READ_CHUNK):
                    if not self._budget.take(len(chunk)):
                        raise CallError(
                            grpc.StatusCode.RESOURCE_EXHAUSTED,
                            "the web port holds too many request bytes; retry shortly",
                        )
                    body += chunk
                    if len(body) > limit:
                        raise too_large
        except TimeoutError:
            self._budget.give_back(len(body))
            raise CallError(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"the request body did not arrive within {self._limits.web_body_timeout:g} s",
            ) from None
        except BaseException:
            self._budget.give_back(len(body))
            raise
        return bytes(body)


def _exchange(request: web.Request, cors_headers: dict[str, str]) -> Exchange | None:
    if request.content_type in grpc_web.CONTENT_TYPES:
        return grpc_web.GrpcWebExchange(request, cors_headers)
    if request.content_type in connect.CONTENT_TYPES:
        return connect.exchange_for(request, cors_headers)
    return None


def _require_a_message(path: str, messages: list[bytes]) -> None:
    """A method that takes one request message needs exactly one: a call forwarded
    without one is left waiting by the native server until its deadline, or for good."""
    method = method_for(path)
    if method is None or method.client_streaming:
        return
    if not messages:
        raise CallError(
            grpc.StatusCode.INVALID_ARGUMENT, f"the request holds no message; {path} takes one"
        )
    if len(messages) > 1:
        # The native server would read the first and drop the rest unread.
        raise CallError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"the request holds {len(messages)} messages; {path} takes one",
        )


def _refused(origin: str | None, path: str) -> dict[str, object]:
    """A refused call's log fields: what the caller sent, cut."""
    return {"origin": None if origin is None else cut(origin), "path": cut(path)}


def _call_metadata(request: web.Request) -> grpc.aio.Metadata:
    try:
        return metadata.from_headers(request.headers)
    except ValueError as error:
        raise CallError(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from None

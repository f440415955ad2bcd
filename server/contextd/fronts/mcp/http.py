"""MCP over streamable HTTP at ``/mcp``, on a port of its own, served by uvicorn in the
server's event loop.

With a credential required (``--auth api-key`` or ``jwt``) every HTTP request needs
``Authorization: Bearer <key or token>``, checked by a native call before the MCP
server sees the request: a refused one is ``401`` with ``WWW-Authenticate: Bearer``, as
an OAuth resource server answers. The bearer then travels with every native call the
tools make, which authenticate it again, so a revoked key stops working at once. The
MCP session belongs to the credential that opened it (the SDK refuses its id from
another).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import socket
import ssl
import time
from typing import Any

import grpc
import grpc.aio
import uvicorn
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from contextd.fronts.caller import Caller
from contextd.fronts.listener import cannot_listen
from contextd.fronts.mcp.native import CHANNEL_OPTIONS, USER_HEADER, Native
from contextd.fronts.mcp.tools import build_server

PATH = "/mcp"
log = logging.getLogger("contextd.mcp")

# A credential the native server accepted is believed this long without asking again
# (the tools' own calls are checked every time).
_CHECKED_FOR_S = 1.0
_MAX_REMEMBERED = 10_000
_REFUSED = "a valid credential is required"


def http_caller(ctx: Context) -> Caller:
    """The caller of an HTTP request: its Authorization header and X-Contextd-User."""
    request: Any = ctx.request_context.request
    headers = request.headers if request is not None else {}
    return Caller(headers.get("authorization", ""), headers.get(USER_HEADER, "").strip())


class BearerRequired:
    """ASGI middleware: a request without a credential the native server accepts is
    answered 401; an accepted one is the request's user (whose session it opens)."""

    def __init__(self, app: ASGIApp, native: Native) -> None:
        self._app = app
        self._native = native
        self._accepted: dict[str, float] = {}  # credential digest -> until when

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        header = Headers(scope=scope).get("authorization", "")
        token = header[7:].strip() if header[:7].lower() == "bearer " else ""
        digest = hashlib.sha256(token.encode()).hexdigest()
        refusal = await self._check(header, digest) if token else (401, {})
        if refusal is not None:
            await _refuse(send, *refusal)
            return
        scope["user"] = AuthenticatedUser(
            AccessToken(token=token, client_id=digest[:32], scopes=[])
        )
        await self._app(scope, receive, send)

    async def _check(self, header: str, digest: str) -> tuple[int, dict[str, str]] | None:
        """None when accepted; else the status and headers to refuse with."""
        now = time.monotonic()
        if self._accepted.get(digest, 0.0) > now:
            return None
        try:
            await self._native.check(Caller(header))
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.UNAUTHENTICATED:
                return 401, {}
            if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                return 429, {"retry-after": "1"}
            return 503, {"retry-after": "1"}
        if len(self._accepted) >= _MAX_REMEMBERED:
            self._accepted = {k: t for k, t in self._accepted.items() if t > now}
        self._accepted[digest] = now + _CHECKED_FOR_S
        return None


async def _refuse(send: Send, status: int, headers: dict[str, str]) -> None:
    if status == 401:
        body = {"error": "invalid_token", "error_description": _REFUSED}
        headers = {
            "www-authenticate": f'Bearer error="invalid_token", error_description="{_REFUSED}"'
        }
    else:
        body = {"error": "unavailable", "error_description": "retry shortly"}
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *((k.encode(), v.encode()) for k, v in headers.items()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


class McpListener:
    """The MCP port: its own uvicorn server, in this event loop, calling the native port
    at ``target``."""

    def __init__(
        self,
        target: str,
        *,
        credential_required: bool,
        host: str,
        max_body: int,
        max_connections: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        native = Native(self._channel)
        mcp = build_server(native, http_caller)
        app: ASGIApp = mcp.streamable_http_app(
            streamable_http_path=PATH, host=host, max_request_body_size=max_body
        )
        if credential_required:
            app = BearerRequired(app, native)
        self._config = uvicorn.Config(
            app,
            log_config=None,  # the server's own logging, JSON lines
            access_log=False,
            lifespan="on",  # runs the MCP session manager
            limit_concurrency=max_connections,
        )
        self._ssl_context = ssl_context
        self._server = uvicorn.Server(self._config)
        self._socket: socket.socket | None = None
        self._main: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int, *, reuse_port: bool = False) -> int:
        """Listen; return the bound port (``port`` 0 picks a free one). ``reuse_port``:
        other processes of the same server listen on it too (SO_REUSEPORT)."""
        try:
            self._socket = _listening_socket(host, port, reuse_port)
        except OSError as error:
            await self._channel.close(None)
            raise cannot_listen("the MCP port", host, port, error) from None
        self._config.load()
        # The server's own TLS context (and with it its client-certificate rule), not one
        # uvicorn would build from the files again.
        self._config.ssl = self._ssl_context
        # uvicorn's own lines (started, shutting down) are not the server's news.
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
        # uvicorn's serve() without its signal handlers: the server's own stop it.
        self._main = asyncio.create_task(self._server._serve(sockets=[self._socket]))
        while not self._server.started:
            if self._main.done():
                await self._main  # its error, if it has one
                raise SystemExit("the MCP port did not start")
            await asyncio.sleep(0.005)
        return int(self._socket.getsockname()[1])

    async def aclose(self, seconds: float = 0.0) -> None:
        """Refuse new connections, give open ones up to ``seconds``, close the channel."""
        if self._main is not None:
            self._config.timeout_graceful_shutdown = max(1, round(seconds))
            self._server.should_exit = True
            await self._main
        await self._channel.close(None)


def _listening_socket(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """A TCP listener made the way asyncio makes its own: with its protocol named, so that
    asyncio turns Nagle's algorithm off on the connections it accepts (it does so only for
    sockets whose protocol is IPPROTO_TCP; without, each answer waits on a delayed ACK,
    about 40 ms)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None,
        port,
        type=socket.SOCK_STREAM,
        proto=socket.IPPROTO_TCP,
        flags=socket.AI_PASSIVE,
    )[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        listener.bind(address)
        listener.listen(100)
    except OSError:
        listener.close()
        raise
    return listener

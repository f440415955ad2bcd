"""MCP over streamable HTTP at ``/mcp``, on a port of its own, served by uvicorn in the
server's event loop.

With a credential required (``--auth api-key`` or ``jwt``) every HTTP request needs
``Authorization: Bearer <key or token>``, checked by a native call before the MCP
server sees the request: a refused one is ``401`` with ``WWW-Authenticate: Bearer``
naming the port's protected resource metadata (RFC 9728), which anyone may read, as
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
import re
import socket
import ssl
import time
from dataclasses import dataclass
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
from contextd.fronts.limits import RequestLimits
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
_UNAVAILABLE = {"error": "unavailable", "error_description": "retry shortly"}
_REFUSAL_BODIES = {
    401: {"error": "invalid_token", "error_description": _REFUSED},
    429: _UNAVAILABLE,
    503: _UNAVAILABLE,
}
# The metadata document's addresses: the root one, and the one of the resource at /mcp
# (RFC 9728, 3.1), which a refusal names.
METADATA_PATHS = (
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
)
# A Host header the document may name: a name or an address, and a port.
_AUTHORITY = re.compile(r"(?:[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?")


def http_caller(ctx: Context) -> Caller:
    """The caller of an HTTP request: its Authorization header and X-Contextd-User."""
    request: Any = ctx.request_context.request
    headers = request.headers if request is not None else {}
    return Caller(headers.get("authorization", ""), headers.get(USER_HEADER, "").strip())


# Where an HTTP request names its user, for the error of a request that names none.
USER_SOURCE = f"the {USER_HEADER} header"


@dataclass(frozen=True, slots=True)
class Protection:
    """The credential the port asks for, as its metadata document tells it: ``api-key``
    (keys of ``contextd keys create``) or ``jwt`` (tokens of ``issuers``)."""

    credential: str
    issuers: tuple[str, ...] = ()


class ProtectedResource:
    """ASGI middleware of a port that asks for a credential: its protected resource
    metadata (RFC 9728) for anyone; any other request without a credential the native
    server accepts is answered 401, naming that document; an accepted one is the
    request's user (whose session it opens)."""

    def __init__(self, app: ASGIApp, native: Native, protection: Protection) -> None:
        self._app = app
        self._native = native
        self._protection = protection
        self._accepted: dict[str, float] = {}  # credential digest -> until when

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if scope["path"] in METADATA_PATHS:
            await self._metadata(scope, send)
            return
        header = Headers(scope=scope).get("authorization", "")
        token = header[7:].strip() if header[:7].lower() == "bearer " else ""
        digest = hashlib.sha256(token.encode()).hexdigest()
        refusal = await self._check(header, digest) if token else (401, {})
        if refusal is not None:
            status, headers = refusal
            if status == 401:
                headers = {"www-authenticate": _challenge(_base_url(scope))}
            await _answer(send, status, _REFUSAL_BODIES[status], headers)
            return
        scope["user"] = AuthenticatedUser(
            AccessToken(token=token, client_id=digest[:32], scopes=[])
        )
        await self._app(scope, receive, send)

    async def _metadata(self, scope: Scope, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            body = {"error": "method_not_allowed", "error_description": "GET the document"}
            await _answer(send, 405, body, {"allow": "GET, HEAD"})
            return
        document = metadata_document(_base_url(scope), self._protection)
        headers = {"cache-control": "max-age=300", "access-control-allow-origin": "*"}
        await _answer(send, 200, document, headers, head=scope["method"] == "HEAD")

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


def metadata_document(base_url: str, protection: Protection) -> dict[str, Any]:
    """The port's protected resource metadata (RFC 9728): the resource, how a bearer is
    sent, and who issues the credentials: the JWT issuers, or, with API keys, no
    authorization server (the ``contextd_credential`` member says which)."""
    document: dict[str, Any] = {
        "resource": base_url + PATH,
        "resource_name": "contextd",
        "bearer_methods_supported": ["header"],
        "contextd_credential": protection.credential,
    }
    if protection.issuers:
        document["authorization_servers"] = list(protection.issuers)
    if protection.credential == "api-key":
        document["contextd_credential_description"] = (
            "an API key made with `contextd keys create`, sent as a bearer token; "
            "no authorization server issues them"
        )
    return document


def _base_url(scope: Scope) -> str:
    """The scheme and authority the request reached: its Host header when it is one,
    else the address the port listens on."""
    scheme = "https" if scope.get("scheme") == "https" else "http"
    host = Headers(scope=scope).get("host", "")
    if not _AUTHORITY.fullmatch(host):
        server = scope.get("server") or ("localhost", None)
        name = f"[{server[0]}]" if ":" in str(server[0]) else str(server[0])
        host = name if server[1] is None else f"{name}:{server[1]}"
    return f"{scheme}://{host}"


def _challenge(base_url: str) -> str:
    return (
        f'Bearer error="invalid_token", error_description="{_REFUSED}", '
        f'resource_metadata="{base_url}{METADATA_PATHS[1]}"'
    )


async def _answer(
    send: Send, status: int, body: dict[str, Any], headers: dict[str, str], head: bool = False
) -> None:
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
    await send({"type": "http.response.body", "body": b"" if head else data})


class McpListener:
    """The MCP port: its own uvicorn server, in this event loop, calling the native port
    at ``target``."""

    def __init__(
        self,
        target: str,
        *,
        protection: Protection | None,
        host: str,
        limits: RequestLimits,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        native = Native(self._channel)
        mcp = build_server(native, http_caller, USER_SOURCE)
        app: ASGIApp = mcp.streamable_http_app(
            streamable_http_path=PATH, host=host, max_request_body_size=limits.max_message_bytes
        )
        if protection is not None:
            app = ProtectedResource(app, native, protection)
        self._config = uvicorn.Config(
            app,
            log_config=None,  # the server's own logging, JSON lines
            access_log=False,
            lifespan="on",  # runs the MCP session manager
            limit_concurrency=limits.web_max_connections,
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

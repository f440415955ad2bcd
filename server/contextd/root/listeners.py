"""Composition root, the listeners beside the native server, all started from here: the
native port, the private socket the web and MCP ports forward to under TLS, the web port
(gRPC-Web, Connect and, with --openai-api, the OpenAI-compatible API), the MCP port and
the metrics port. The fronts on the web and MCP ports translate to native calls, so
auth, tenants, limits and the audit log apply as on every port."""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

import grpc
import grpc.aio
from grpc_health.v1 import _async as health_aio  # health.aio re-exports this module
from grpc_health.v1 import health_pb2

from contextd.config import Settings
from contextd.fronts.anthropic.routes import AnthropicRoutes
from contextd.fronts.grpc.in_process import InProcess
from contextd.fronts.grpc.interceptors import WEB_PEER_KEY
from contextd.fronts.limits import RequestLimits
from contextd.fronts.openai.routes import Model, OpenAIRoutes
from contextd.fronts.web.cors import CorsPolicy
from contextd.fronts.web.gateway import CallCounter, Mount, WebGateway
from contextd.fronts.web.healthz import HealthStatus
from contextd.metrics.endpoint import PATH as METRICS_PATH
from contextd.metrics.endpoint import MetricsEndpoint
from contextd.metrics.prometheus import PrometheusRecorder
from contextd.metrics.recorder import Recorder
from contextd.providers.registry import make_provider
from contextd.root.ports import Port, bind_problem
from contextd.root.tls import ServerTls
from contextd.store.engine.database import Database

log = logging.getLogger("contextd.server")

# Stops a listener given the seconds left of the grace period.
Stop = Callable[[float], Awaitable[None]]


def request_limits(settings: Settings) -> RequestLimits:
    """The limits every front reads, from the settings."""
    return RequestLimits(**{f.name: getattr(settings, f.name) for f in fields(RequestLimits)})


@dataclass
class Started:
    """The listeners started beside the native server, and what stops them."""

    web: WebGateway | None = None
    # Stopped with the native server: their calls are native calls underneath (MCP).
    with_native: list[Stop] = field(default_factory=list)
    # Closed after the native server has stopped (the metrics port, read to the end).
    after_native: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


async def start_listeners(
    settings: Settings,
    target: str,
    tls: ServerTls | None,
    undo: contextlib.AsyncExitStack,
    *,
    cors: CorsPolicy | None,
    peer_secret: str,
    health: HealthStatus,
    metrics: Recorder,
    db: Database,
    in_process: InProcess,
    share_ports: bool = False,
    metrics_socket: str = "",
) -> Started:
    """Every listener the settings ask for beside the native port, forwarding to
    ``target``: the web port when ``cors`` is set, the MCP port, the metrics port.
    ``undo`` closes each if a later step of the start fails. ``in_process``: the native
    methods the web port's model APIs call in process. ``share_ports``: a worker's,
    whose web and MCP ports its siblings listen on too. ``metrics_socket``: a worker's,
    whose figures its parent's gatherer reads there (workers.py)."""
    started = Started()
    if cors is not None:
        mounts = await web_mounts(settings)
        started.web = await start_web(
            settings,
            cors,
            target,
            tls,
            peer_secret,
            health,
            metrics,
            mounts,
            share_ports,
            in_process,
        )
        undo.push_async_callback(started.web.aclose)
    if settings.mcp_port >= 0:
        started.with_native.append(await start_mcp(settings, target, tls, share_ports))
        undo.push_async_callback(started.with_native[-1], 0.0)
    if isinstance(metrics, PrometheusRecorder):
        endpoint = await start_metrics(settings, metrics, db, metrics_socket)
        undo.push_async_callback(endpoint.aclose)
        started.after_native.append(endpoint.aclose)
    return started


def bind_native(server: grpc.aio.Server, settings: Settings, tls: ServerTls | None) -> int:
    """The native port, bound (not yet serving): the port number (one picked for port 0)."""
    address = f"{settings.host}:{settings.port}"
    try:
        port = (
            server.add_insecure_port(address)
            if tls is None
            else server.add_secure_port(address, tls.grpc_credentials())
        )
    except RuntimeError:  # grpc's only word on it; its log line says why
        port = 0
    if port == 0:  # taken since it was checked, say
        why = bind_problem(Port("--port", settings.host, settings.port))
        raise SystemExit(f"cannot listen: {why or address}")
    return port


def loopback_target(settings: Settings, native_port: int) -> str:
    """The native port seen from this process: a wildcard address is reached on loopback."""
    loopback = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "[::]": "[::1]", "": "127.0.0.1"}
    return f"{loopback.get(settings.host, settings.host)}:{native_port}"


def private_socket(server: grpc.aio.Server) -> tuple[str, Callable[[], Awaitable[None]]]:
    """A plain-text listener for the web port's forwarded calls, on a Unix socket in a
    directory only this user can enter. With TLS on, the gateway cannot use the native
    port: under mutual TLS it would need a client certificate of its own, and the TLS
    was already ended (and the client's certificate checked) on the web port. Returns
    the target and what removes the directory."""
    directory = Path(tempfile.mkdtemp(prefix="contextd-"))  # mode 0700

    async def remove() -> None:
        shutil.rmtree(directory, ignore_errors=True)

    target = f"unix:{directory / 'native.sock'}"
    if server.add_insecure_port(target) == 0:
        shutil.rmtree(directory, ignore_errors=True)
        raise SystemExit(f"cannot listen on {target} for the web port")
    return target, remove


def overall_health(servicer: health_aio.HealthServicer) -> HealthStatus:
    """The server's overall status by name, as the health service answers a Check for
    the service "" (always known to it, so Check never needs a call context)."""

    async def status() -> str:
        reply = await servicer.Check(health_pb2.HealthCheckRequest(), None)
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))

    return status


async def start_web(
    settings: Settings,
    cors: CorsPolicy,
    target: str,
    tls: ServerTls | None,
    peer_secret: str,
    health: HealthStatus,
    metrics: Recorder,
    mounts: Sequence[Mount] = (),
    share_port: bool = False,
    in_process: InProcess | None = None,
) -> WebGateway:
    """The web port (gRPC-Web, Connect, and ``mounts``), forwarding to ``target``;
    ``share_port``: a worker's, whose port its siblings listen on too; ``in_process``:
    the native methods the mounts call in process."""
    count: CallCounter | None = None
    if isinstance(metrics, PrometheusRecorder):
        web_call = metrics.web_call

        def count(protocol: str, code: grpc.StatusCode) -> None:
            web_call(protocol, code.name)

    gateway = WebGateway(
        target,
        cors,
        request_limits(settings),
        shutdown_timeout=settings.shutdown_grace + 5,
        ssl_context=tls.ssl_context if tls is not None else None,
        peer_key=WEB_PEER_KEY if peer_secret else "",
        peer_secret=peer_secret,
        health=health,
        count=count,
        mounts=mounts,
        in_process=in_process,
    )
    host = settings.web_host or settings.host
    port = await gateway.start(host, settings.web_port, reuse_port=share_port)
    log.info(
        "grpc-web listening",
        extra={"address": f"{host}:{port}", "target": target, "tls": tls is not None},
    )
    return gateway


async def start_metrics(
    settings: Settings, recorder: PrometheusRecorder, db: Database, private: str = ""
) -> MetricsEndpoint:
    """The metrics port, or with ``private`` a worker's snapshots on that Unix socket."""
    endpoint = MetricsEndpoint(recorder, db.size_bytes)
    if private:
        await endpoint.start_private(private)
        return endpoint
    host = settings.metrics_host or settings.host
    port = await endpoint.start(host, settings.metrics_port)
    log.info("metrics listening", extra={"address": f"{host}:{port}", "path": METRICS_PATH})
    return endpoint


async def web_mounts(settings: Settings) -> list[Mount]:
    """What the web port serves besides gRPC-Web and Connect: Anthropic's Messages API
    with --anthropic-api (first: the OpenAI API answers every other path under /v1), and
    the OpenAI-compatible API with --openai-api, listing the configured model. Its name
    is read from a provider built as the server builds its own (with its default when
    --provider-model is empty), then closed: nothing of the running server is reached
    into."""
    mounts: list[Mount] = [AnthropicRoutes()] if settings.anthropic_api else []
    if not settings.openai_api:
        return mounts
    provider = make_provider(
        settings.provider, base_url=settings.provider_base_url, model=settings.provider_model
    )
    try:
        model = Model(provider.default_model, provider.name)
    finally:
        await provider.aclose()
    return [*mounts, OpenAIRoutes([model])]


async def start_mcp(
    settings: Settings, target: str, tls: ServerTls | None, share_port: bool = False
) -> Stop:
    """The MCP port (its native calls go to ``target``); returns what stops it.
    ``share_port``: a worker's, whose port its siblings listen on too."""
    # Imported here: the MCP SDK and uvicorn load only for a server that serves MCP.
    from contextd.fronts.mcp.http import PATH, McpListener, Protection

    host = settings.mcp_host or settings.host
    issuers = tuple(i.strip() for i in settings.jwt_issuer.split(",") if i.strip())
    protection = None
    if settings.auth != "none":
        protection = Protection(settings.auth, issuers if settings.auth == "jwt" else ())
    listener = McpListener(
        target,
        protection=protection,
        host=host,
        limits=request_limits(settings),
        ssl_context=tls.ssl_context if tls is not None else None,
    )
    port = await listener.start(host, settings.mcp_port, reuse_port=share_port)
    log.info(
        "mcp listening",
        extra={"address": f"{host}:{port}", "path": PATH, "tls": tls is not None},
    )
    return listener.aclose

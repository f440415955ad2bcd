"""Composition root, the lifecycle: start the server that wiring.py builds (the data
directory locked, the database opened, the ports bound, the listeners started, health
published), and stop it. Whatever started is undone in reverse when a later step fails."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from grpc_health.v1 import _async as health_aio  # health.aio re-exports this module
from grpc_health.v1 import health, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from contextd.config import Settings
from contextd.core.errors import DatabaseUnavailable
from contextd.core.network import exposed_hosts
from contextd.fronts.grpc.convert import OpaqueIds, PublicIds
from contextd.fronts.grpc.serving_health import ServingHealth
from contextd.fronts.web.gateway import WebGateway
from contextd.root.listeners import (
    bind_native,
    loopback_target,
    overall_health,
    private_socket,
    request_limits,
    start_listeners,
)
from contextd.root.prepare import Prepared, prepare
from contextd.root.tls import ServerTls
from contextd.root.wiring import SERVICE_NAMES, Closer, Services, build_services, untimed
from contextd.store.engine.data_lock import DataDirInUse, DataDirLock
from contextd.store.engine.database import Database
from contextd.store.engine.private import NotPrivate, make_dir
from contextd.store.open import Store, masked_url, open_store
from contextd.store.server_secrets import id_key
from contextd.tracing.setup import install_from_env

log = logging.getLogger("contextd.server")


@dataclass
class RunningServer:
    server: grpc.aio.Server
    health: health_aio.HealthServicer
    port: int
    settings: Settings
    store: Store
    closers: list[Closer]
    lock: DataDirLock | None  # SQLite only: replicas on PostgreSQL share no directory
    web: WebGateway | None = None
    # Stopped with the native server: the MCP port, the calls made in process.
    listeners: Sequence[Closer] = ()

    @property
    def db(self) -> Database:
        return self.store.db

    async def stop(self, grace: float | None = None) -> None:
        """Report NOT_SERVING, keep serving for ``--drain-delay`` so that load balancers
        move away, then refuse new calls; calls in flight and then after-turn work get
        what is left of the grace period (``--shutdown-grace``, or ``grace``), which
        bounds the whole shutdown. Then close the database."""
        loop = asyncio.get_running_loop()
        budget = self.settings.shutdown_grace if grace is None else grace
        deadline = loop.time() + budget
        await self.health.enter_graceful_shutdown()
        drain = min(self.settings.drain_delay, budget) if grace is None else 0.0
        if drain > 0:
            log.info("draining", extra={"drain_s": drain})
            await asyncio.sleep(drain)
        left = max(0.0, deadline - loop.time())
        # Web and MCP calls are native calls underneath: they end when the native server
        # stops, those made in process when their grace ends as well.
        web = [self.web.aclose()] if self.web else []
        await asyncio.gather(self.server.stop(left), *web, *(c(left) for c in self.listeners))
        for close in self.closers:
            await close(max(0.0, deadline - loop.time()))
        await self.store.close()
        if self.lock is not None:
            self.lock.release()


async def start(
    settings: Settings,
    extra_handlers: Sequence[grpc.GenericRpcHandler[Any, Any]] = (),
    *,
    prepared: Prepared | None = None,
    sweeps: bool = True,
    metrics_socket: str = "",
) -> RunningServer:
    """The server ``settings`` describe, serving once this returns; SystemExit with the
    reason when it cannot start (settings, files, the data directory, the database, a
    port), with whatever had started undone. ``prepared``: a worker's start (workers.py),
    its parent having checked the settings and the ports and locked the data directory;
    its ports are shared with the parent's other workers. ``sweeps``: this process runs
    the passes over the whole database (one worker does). ``metrics_socket``: where a
    worker's figures are read by its parent's gatherer, which serves --metrics-port."""
    worker = prepared is not None
    if prepared is None:
        prepared = prepare(settings)  # every settings error at once, before anything starts
        warn_without_tls(settings, prepared.tls)
    tls = prepared.tls
    make_dir(settings.data_dir)
    # Whatever started is undone in reverse if a later step fails; once everything
    # runs, RunningServer.stop() owns the undoing.
    async with contextlib.AsyncExitStack() as undo:
        lock = None if worker else lock_data_dir(settings)
        if lock is not None:
            undo.callback(lock.release)
        store = await open_configured_store(settings)
        db = store.db
        undo.push_async_callback(store.close)
        services = build_services(settings, store, prepared, await public_ids(db), sweeps=sweeps)
        server, health_servicer = _native_server(settings, services, extra_handlers, worker)
        for close in reversed(services.closers):
            undo.push_async_callback(close, 0.0)
        services.start()
        # Before serving: the turns a killed server left open get their end.
        await services.chat.close_interrupted_turns()
        serving = ServingHealth(health_servicer, SERVICE_NAMES)
        _health_follows_watchers(db, serving, settings.database_url)
        closers = [*services.closers, untimed(serving.aclose)]
        web_target = ""
        if tls is not None and (prepared.cors is not None or settings.mcp_port >= 0):
            web_target, remove_socket = private_socket(server)
            undo.push_async_callback(remove_socket)
            closers.append(untimed(remove_socket))
        port = bind_native(server, settings, tls)
        await server.start()
        undo.push_async_callback(server.stop, 0)
        # Started and logged before "listening", so whoever waits for that line finds it.
        started = await start_listeners(
            settings,
            web_target or loopback_target(settings, port),
            tls,
            undo,
            cors=prepared.cors,
            peer_secret=services.web_peer_secret,
            in_process=services.in_process,
            health=overall_health(health_servicer),
            metrics=services.metrics,
            db=db,
            share_ports=worker,
            metrics_socket=metrics_socket,
        )
        closers.extend(untimed(close) for close in started.after_native)
        await serving.start()
        log.info("listening", extra={"address": f"{settings.host}:{port}", "tls": tls is not None})
        undo.pop_all()
    listeners = [services.in_process.stop, *started.with_native]
    return RunningServer(
        server, health_servicer, port, settings, store, closers, lock, started.web, listeners
    )


def _native_server(
    settings: Settings,
    services: Services,
    extra_handlers: Sequence[grpc.GenericRpcHandler[Any, Any]],
    share_port: bool,
) -> tuple[grpc.aio.Server, health_aio.HealthServicer]:
    """The native server with every service, health and reflection (not yet bound);
    ``share_port``: a worker's, whose port its siblings listen on too."""
    limits = request_limits(settings)
    server = grpc.aio.server(
        interceptors=[services.guard],
        options=[
            ("grpc.max_receive_message_length", limits.max_message_bytes),
            ("grpc.max_send_message_length", limits.max_message_bytes),
            # gRPC core would share the port with any other listener that asks the same:
            # only a server's own workers do (ports.py checked it free before).
            ("grpc.so_reuseport", int(share_port)),
        ],
        maximum_concurrent_rpcs=limits.max_concurrent_rpcs,
    )
    services.register(server)
    health_servicer = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    if extra_handlers:
        server.add_generic_rpc_handlers(tuple(extra_handlers))
    return server, health_servicer


async def public_ids(db: Database) -> PublicIds:
    """The ids of the deployment ``db`` stores, under its key (made on first use)."""
    return PublicIds(OpaqueIds(await id_key(db)))


def warn_without_tls(settings: Settings, tls: ServerTls | None) -> None:
    for host in exposed_hosts(settings.listen_hosts()) if tls is None else []:
        log.warning(
            f"listening on {host} without TLS: anyone on the network can read and alter "
            "the calls; use --tls-cert and --tls-key",
            extra={"address": host},
        )


def lock_data_dir(settings: Settings) -> DataDirLock | None:
    """The data directory's lock: one server per SQLite file. PostgreSQL's replicas share
    no directory: the database is logged instead."""
    if settings.database_url:
        log.info("database", extra={"url": masked_url(settings.database_url)})
        return None
    try:
        return DataDirLock.acquire(settings.data_dir)
    except DataDirInUse as error:
        raise SystemExit(str(error)) from None


async def open_configured_store(settings: Settings) -> Store:
    """The store the settings name; SystemExit with the reason when it cannot open."""
    try:
        return await open_store(
            settings.database_url,
            settings.data_dir,
            sqlite_synchronous=settings.sqlite_synchronous,
            pool_size=settings.database_pool_size,
            statement_timeout=settings.database_statement_timeout,
            pool_timeout=settings.database_pool_timeout,
            watch_disk=True,
            shared=settings.worker_count() > 1,
        )
    except DatabaseUnavailable as error:
        raise SystemExit(f"{masked_url(settings.database_url)}: {error}") from None
    except NotPrivate as error:
        raise SystemExit(str(error)) from None


def _health_follows_watchers(db: Database, serving: ServingHealth, database_url: str) -> None:
    """NOT_SERVING while writes fail for want of space or the database is out of reach,
    SERVING once neither is the case."""
    if db.disk is not None:
        serving.follow(
            "disk",
            db.disk.listeners,
            recovered="the disk has room again",
            failed="the disk is full: writes fail",
            extra={"data_dir": str(db.disk.directory)},
        )
    if db.reachability is not None:
        serving.follow(
            "database",
            db.reachability.listeners,
            recovered="the database answers again",
            failed="the database cannot be reached: calls that need it fail",
            extra={"url": masked_url(database_url)},
        )


def stop_signalled() -> asyncio.Event:
    """An event SIGINT or SIGTERM sets: the graceful stop. Handled from before the
    start, so that a signal right after "listening" is a graceful stop too."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def serve(settings: Settings) -> None:
    """Run until SIGINT or SIGTERM, then shut down gracefully."""
    stop = stop_signalled()
    tracing = install_from_env()
    try:
        running = await start(settings)
        await stop.wait()
        log.info("shutting down", extra={"grace_s": settings.shutdown_grace})
        await running.stop()
    finally:
        if tracing is not None:  # the spans still waiting are exported
            await asyncio.to_thread(tracing.shutdown)
    log.info("stopped")

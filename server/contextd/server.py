"""Composition root: wires app/ into a grpc.aio server with health and reflection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import signal
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from grpc_health.v1 import _async as health_aio  # health.aio re-exports this module
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from contextd import __version__, host_protocols
from contextd.api.auth import Authenticator
from contextd.api.auth_modes import authenticator_factory
from contextd.api.chat_servicer import ChatServicer
from contextd.api.context_servicer import ContextServicer
from contextd.api.interceptors import WEB_PEER_KEY, GuardInterceptor, Limits
from contextd.api.limits import RateLimiter, TurnSlots
from contextd.api.serving_health import ServingHealth
from contextd.api.session_servicers import MemoryServicer, PromptServicer, SessionServicer
from contextd.api.user_servicer import UserServicer
from contextd.app.after_turn import AfterTurnRunner, AfterTurnSettings
from contextd.app.chat import ChatApp, ChatLimits
from contextd.app.context import ContextApp
from contextd.app.memories import ExpiryDefaults, MemoriesApp
from contextd.app.memory_embedding import search_by_meaning
from contextd.app.prompts import PromptsApp
from contextd.app.retention import RetentionPurger, check_days
from contextd.app.session_context import LayerDefaults, SessionContextBuilder
from contextd.app.sessions import SessionsApp
from contextd.app.users import UsersApp
from contextd.config import Settings
from contextd.core.content import ImageLimits
from contextd.core.errors import DatabaseUnavailable
from contextd.core.network import exposed_hosts
from contextd.core.tokens import TokenizerRegistry
from contextd.metrics.endpoint import PATH as METRICS_PATH
from contextd.metrics.endpoint import MetricsEndpoint
from contextd.metrics.prometheus import PrometheusRecorder
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.providers.embeddings import Embedder, make_embedder
from contextd.providers.registry import api_key_from_env, make_provider
from contextd.store.catalog import CatalogRepo
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.data_lock import DataDirInUse, DataDirLock
from contextd.store.engine.database import Database
from contextd.store.engine.disk import DiskWatch
from contextd.store.engine.open import (
    check_database_url,
    masked_url,
    open_database,
)
from contextd.store.event_log.removals import LogRemovals
from contextd.store.memory.history import MemoryHistoryRepo
from contextd.store.memory.repository import MemoryRepo
from contextd.store.memory.vectors import MemoryVectorRepo
from contextd.store.partial_answers import LEASE_SECONDS, PartialAnswerRepo
from contextd.store.retention import SessionPurge
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo
from contextd.store.users import UserRepo
from contextd.tls import ServerTls
from contextd.tracing.setup import install_from_env
from contextd.v1 import (
    chat_pb2,
    chat_pb2_grpc,
    context_pb2,
    context_pb2_grpc,
    memory_pb2,
    memory_pb2_grpc,
    prompts_pb2,
    prompts_pb2_grpc,
    sessions_pb2,
    sessions_pb2_grpc,
    users_pb2,
    users_pb2_grpc,
)
from contextd.web.cors import CorsPolicy
from contextd.web.gateway import CallCounter, Mount, WebGateway
from contextd.web.healthz import HealthStatus
from contextd.web.limits import WebLimits

log = logging.getLogger("contextd.server")

# Closes a part of the server given the seconds left of the grace period.
Closer = Callable[[float], Awaitable[None]]


def _health_follows_watchers(db: Database, serving: ServingHealth, database_url: str) -> None:
    """NOT_SERVING while writes fail for want of space or the database is out of reach,
    SERVING once neither is the case."""
    assert db.disk is not None
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


def _untimed(close: Callable[[], Awaitable[None]]) -> Closer:
    """A closer that takes no time limit (it finishes at once)."""

    async def closer(_seconds_left: float) -> None:
        await close()

    return closer


# Not a setting, for tests only: a session lease of a few seconds, so that a test sees a
# killed replica's turn closed by another soon.
TESTING_TURN_LEASE_ENV = "CONTEXTD_TESTING_TURN_LEASE_S"

# A minute between deltas is already more than anyone watching waits for.
MAX_ECHO_DELAY_MS = 60_000

SERVICE_NAMES = (
    context_pb2.DESCRIPTOR.services_by_name["ContextService"].full_name,
    chat_pb2.DESCRIPTOR.services_by_name["ChatService"].full_name,
    sessions_pb2.DESCRIPTOR.services_by_name["SessionService"].full_name,
    memory_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    prompts_pb2.DESCRIPTOR.services_by_name["PromptService"].full_name,
    users_pb2.DESCRIPTOR.services_by_name["UserService"].full_name,
)


@dataclass
class RunningServer:
    server: grpc.aio.Server
    health: health_aio.HealthServicer
    port: int
    settings: Settings
    db: Database
    closers: list[Closer]
    lock: DataDirLock | None  # SQLite only: replicas on PostgreSQL share no directory
    web: WebGateway | None = None
    listeners: Sequence[Closer] = ()  # stopped with the web port: the MCP port

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
        # Web and MCP calls are native calls underneath: they end when the native server stops.
        web = [self.web.aclose()] if self.web else []
        await asyncio.gather(self.server.stop(left), *web, *(c(left) for c in self.listeners))
        for close in self.closers:
            await close(max(0.0, deadline - loop.time()))
        await self.db.close()
        if self.lock is not None:
            self.lock.release()


async def start(
    settings: Settings, extra_handlers: Sequence[grpc.GenericRpcHandler[Any, Any]] = ()
) -> RunningServer:
    tokenizers = TokenizerRegistry(settings.default_tokenizer)
    tokenizers.get(settings.default_tokenizer)  # fail at start-up, not on the first call
    cors = _cors_policy(settings) if settings.web_port >= 0 else None  # before anything starts
    host_protocols.check(settings)  # before anything starts
    authenticator = authenticator_factory(settings)  # before anything starts
    limits = _limits(settings, web=cors is not None)  # before anything starts
    check_database_url(settings.database_url)  # before anything starts
    if not 0 <= settings.echo_delay_ms <= MAX_ECHO_DELAY_MS:
        raise SystemExit(
            f"--echo-delay-ms must be from 0 to {MAX_ECHO_DELAY_MS} milliseconds, "
            f"not {settings.echo_delay_ms}"
        )
    try:
        check_days(settings.retention_days)
        ExpiryDefaults.parse(settings.memory_expiry_days)
        embedder = make_embedder(  # before anything starts
            settings.embedding_provider,
            settings.embedding_model,
            settings.embedding_base_url,
            timeout=settings.embedding_timeout,
        )
    except ValueError as error:
        raise SystemExit(str(error)) from None
    tls = ServerTls.load(settings.tls_cert, settings.tls_key, settings.tls_client_ca)
    for host in exposed_hosts(settings.listen_hosts()) if tls is None else []:
        log.warning(
            f"listening on {host} without TLS: anyone on the network can read and alter "
            "the calls; use --tls-cert and --tls-key",
            extra={"address": host},
        )
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    # Whatever started is undone in reverse if a later step fails; once everything
    # runs, RunningServer.stop() owns the undoing.
    async with contextlib.AsyncExitStack() as undo:
        lock = None
        if settings.database_url:
            log.info("database", extra={"url": masked_url(settings.database_url)})
        else:
            try:
                lock = DataDirLock.acquire(settings.data_dir)
            except DataDirInUse as error:
                raise SystemExit(str(error)) from None
            undo.callback(lock.release)
        try:
            db = await open_database(
                settings.database_url,
                settings.data_dir,
                sqlite_synchronous=settings.sqlite_synchronous,
                pool_size=settings.database_pool_size,
                statement_timeout=settings.database_statement_timeout,
                pool_timeout=settings.database_pool_timeout,
            )
        except DatabaseUnavailable as error:
            raise SystemExit(f"{masked_url(settings.database_url)}: {error}") from None
        undo.push_async_callback(db.close)
        db.disk = DiskWatch(settings.data_dir)
        metrics = _recorder(settings, db)
        guard = _guard(settings, authenticator(db) if authenticator else None, limits, metrics)
        server = grpc.aio.server(
            interceptors=[guard],
            options=[
                ("grpc.max_receive_message_length", settings.max_message_bytes),
                ("grpc.max_send_message_length", settings.max_message_bytes),
            ],
            maximum_concurrent_rpcs=settings.max_concurrent_rpcs,
        )
        closers, chat = _add_services(server, settings, tokenizers, db, metrics, embedder)
        for close in reversed(closers):
            undo.push_async_callback(close, 0.0)
        # Before serving: the turns a killed server left open get their end.
        await chat.close_interrupted_turns()
        health_servicer = health_aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        serving = ServingHealth(health_servicer, SERVICE_NAMES)
        _health_follows_watchers(db, serving, settings.database_url)
        closers.append(_untimed(db.disk.aclose))
        closers.append(_untimed(serving.aclose))
        names = (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME)
        reflection.enable_server_reflection(names, server)
        if extra_handlers:
            server.add_generic_rpc_handlers(tuple(extra_handlers))
        address = f"{settings.host}:{settings.port}"
        web_target = ""
        if tls is not None and (cors is not None or settings.mcp_port >= 0):
            web_target, remove_socket = _private_socket(server)
            undo.push_async_callback(remove_socket)
            closers.append(_untimed(remove_socket))
        try:
            port = (
                server.add_insecure_port(address)
                if tls is None
                else server.add_secure_port(address, tls.grpc_credentials())
            )
        except RuntimeError:  # grpc's only word on it; its log line says why
            port = 0
        if port == 0:
            raise SystemExit(f"cannot listen on {address}: in use or not an address of this host")
        await server.start()
        undo.push_async_callback(server.stop, 0)
        # Started and logged before "listening", so whoever waits for that line finds it.
        web = (
            await _start_web(
                settings,
                cors,
                web_target or _loopback_target(settings, port),
                tls,
                limits.web_peer_secret,
                _overall_health(health_servicer),
                metrics,
                await host_protocols.web_mounts(settings),
            )
            if cors is not None
            else None
        )
        target = web_target or _loopback_target(settings, port)
        listeners = await host_protocols.start_listeners(settings, target, tls, undo)
        if isinstance(metrics, PrometheusRecorder):
            endpoint = await _start_metrics(settings, metrics, db)
            undo.push_async_callback(endpoint.aclose)
            closers.append(_untimed(endpoint.aclose))
        await serving.start()
        log.info("listening", extra={"address": f"{settings.host}:{port}", "tls": tls is not None})
        undo.pop_all()
    return RunningServer(server, health_servicer, port, settings, db, closers, lock, web, listeners)


def _guard(
    settings: Settings, authenticator: Authenticator | None, limits: Limits, metrics: Recorder
) -> GuardInterceptor:
    grpc_metrics = metrics.grpc if isinstance(metrics, PrometheusRecorder) else None
    if authenticator is None:
        return GuardInterceptor(limits=limits, metrics=grpc_metrics)
    open_services = [health.SERVICE_NAME]
    if not settings.auth_protect_reflection:
        open_services.append(reflection.SERVICE_NAME)
    return GuardInterceptor(authenticator, open_services, limits, grpc_metrics)


def _recorder(settings: Settings, db: Database) -> Recorder:
    """What the server records its metrics into: nothing without a metrics port."""
    if settings.metrics_port < 0 or settings.metrics_port > 65535:
        raise SystemExit(f"--metrics-port must be from 0 to 65535, not {settings.metrics_port}")
    if settings.metrics_port == 0:
        return NULL_RECORDER
    recorder = PrometheusRecorder(__version__)
    db.time_statements(recorder.statement_observer(db.engine))
    return recorder


async def _start_metrics(
    settings: Settings, recorder: PrometheusRecorder, db: Database
) -> MetricsEndpoint:
    endpoint = MetricsEndpoint(recorder, db.size_bytes)
    host = settings.metrics_host or settings.host
    port = await endpoint.start(host, settings.metrics_port)
    log.info("metrics listening", extra={"address": f"{host}:{port}", "path": METRICS_PATH})
    return endpoint


def _limits(settings: Settings, web: bool) -> Limits:
    if settings.rate_limit < 0 or settings.rate_limit_burst < 0:
        raise SystemExit("--rate-limit and --rate-limit-burst must not be negative")
    if settings.max_concurrent_turns < 0:
        raise SystemExit("--max-concurrent-turns must not be negative")
    rate = None
    if settings.rate_limit > 0:
        burst = settings.rate_limit_burst or 2 * settings.rate_limit
        if burst < 1:
            raise SystemExit("--rate-limit-burst must be at least 1 (one request)")
        rate = RateLimiter(settings.rate_limit, burst)
    turns = TurnSlots(settings.max_concurrent_turns) if settings.max_concurrent_turns else None
    return Limits(
        rate,
        turns,
        turn_methods=frozenset(
            {f"/{chat_pb2.DESCRIPTOR.services_by_name['ChatService'].full_name}/StreamChat"}
        ),
        exempt_services=(health.SERVICE_NAME,),
        # The web port forwards every browser's call from one address: it vouches for
        # the browser's address with this secret, so calls keyed by address stay apart.
        web_peer_secret=secrets.token_urlsafe(24) if web and rate is not None else "",
    )


def _cors_policy(settings: Settings) -> CorsPolicy:
    try:
        return CorsPolicy.parse(settings.cors_origins)
    except ValueError as error:
        raise SystemExit(str(error)) from None


def _loopback_target(settings: Settings, native_port: int) -> str:
    """The native port seen from this process: a wildcard address is reached on loopback."""
    loopback = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "[::]": "[::1]", "": "127.0.0.1"}
    return f"{loopback.get(settings.host, settings.host)}:{native_port}"


def _private_socket(server: grpc.aio.Server) -> tuple[str, Callable[[], Awaitable[None]]]:
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


def _overall_health(servicer: health_aio.HealthServicer) -> HealthStatus:
    """The server's overall status by name, as the health service answers a Check for
    the service "" (always known to it, so Check never needs a call context)."""

    async def status() -> str:
        reply = await servicer.Check(health_pb2.HealthCheckRequest(), None)
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))

    return status


async def _start_web(
    settings: Settings,
    cors: CorsPolicy,
    target: str,
    tls: ServerTls | None,
    peer_secret: str,
    health: HealthStatus,
    metrics: Recorder,
    mounts: Sequence[Mount] = (),
) -> WebGateway:
    count: CallCounter | None = None
    if isinstance(metrics, PrometheusRecorder):
        web_call = metrics.web_call

        def count(protocol: str, code: grpc.StatusCode) -> None:
            web_call(protocol, code.name)

    gateway = WebGateway(
        target,
        cors,
        settings.max_message_bytes,
        shutdown_timeout=settings.shutdown_grace + 5,
        ssl_context=tls.ssl_context if tls is not None else None,
        limits=WebLimits(
            settings.web_max_connections,
            settings.web_body_timeout,
            settings.web_max_buffered_bytes,
        ),
        peer_key=WEB_PEER_KEY if peer_secret else "",
        peer_secret=peer_secret,
        health=health,
        count=count,
        mounts=mounts,
    )
    host = settings.web_host or settings.host
    port = await gateway.start(host, settings.web_port)
    log.info(
        "grpc-web listening",
        extra={"address": f"{host}:{port}", "target": target, "tls": tls is not None},
    )
    return gateway


def _add_services(
    server: grpc.aio.Server,
    settings: Settings,
    tokenizers: TokenizerRegistry,
    db: Database,
    metrics: Recorder,
    embedder: Embedder | None,
) -> tuple[list[Closer], ChatApp]:
    """Register every service; return what must be closed on stop, and the chat."""
    memories = MemoryRepo(db, half_life_days=settings.memory_half_life_days, metrics=metrics)
    if embedder is not None:  # vectors made in the background, used by every memory search
        embedding = search_by_meaning(
            memories,
            embedder,
            MemoryVectorRepo(db, embedder.model),
            query_timeout=settings.embedding_timeout,
            metrics=metrics,
        )
        embedding.start()
    summaries = SummaryRepo(db)
    catalog = CatalogRepo(db)
    events = db.event_log(settings.data_dir / "history")
    conversation = ConversationRepo(db)
    sessions = SessionsApp(SessionRepo(db), conversation, summaries, memories, tokenizers, events)
    defaults = LayerDefaults(
        identity=settings.system_identity,
        rules=settings.system_rules,
        memory_enabled=settings.memory_enabled,
        memory_limit=settings.memory_limit,
        recent_sessions_limit=settings.recent_sessions_limit,
    )
    builder = SessionContextBuilder(defaults, sessions, catalog, memories, summaries)
    image_limits = ImageLimits(max_image_bytes=settings.max_image_bytes)
    context = ContextApp(tokenizers, settings.max_history_messages, builder, image_limits, metrics)
    context_pb2_grpc.add_ContextServiceServicer_to_server(
        ContextServicer(context, sessions), server
    )
    history = MemoryHistoryRepo(db, memories)
    kept = MemoriesApp(
        memories, sessions, history, ExpiryDefaults.parse(settings.memory_expiry_days)
    )
    memory_pb2_grpc.add_MemoryServiceServicer_to_server(MemoryServicer(kept), server)
    prompts_pb2_grpc.add_PromptServiceServicer_to_server(
        PromptServicer(PromptsApp(catalog)), server
    )
    provider = make_provider(
        settings.provider,
        api_key=api_key_from_env(settings.provider),
        base_url=settings.provider_base_url,
        model=settings.provider_model,
        timeout=settings.provider_timeout,
        echo_chunk_delay=settings.echo_delay_ms / 1000,
    )
    limits = ChatLimits(settings.max_prompt_tokens, settings.warn_prompt_tokens, settings.max_steps)
    # Memories and summaries after each ok turn, in the background; closed first at stop
    # (it still needs the provider and the database).
    after_turn = AfterTurnRunner(
        provider,
        memories,
        summaries,
        conversation,
        history,
        AfterTurnSettings.from_settings(settings),
        metrics,
    )
    chat = ChatApp(
        sessions=sessions,
        conversation=conversation,
        events=events,
        partials=PartialAnswerRepo(
            db, float(os.environ.get(TESTING_TURN_LEASE_ENV) or LEASE_SECONDS)
        ),
        tokenizers=tokenizers,
        builder=builder,
        memories=memories,
        provider=provider,
        limits=limits,
        after_turn=after_turn,
        metrics=metrics,
    )
    if isinstance(metrics, PrometheusRecorder):
        _record_after_turn(metrics, after_turn)
    chat_pb2_grpc.add_ChatServiceServicer_to_server(ChatServicer(chat, context), server)
    sessions_pb2_grpc.add_SessionServiceServicer_to_server(
        SessionServicer(sessions, tokenizers.default, chat, image_limits), server
    )
    # Event logs of deleted sessions wait in notes here until their deletion committed.
    removals = LogRemovals(db, events, settings.data_dir / "log-removals")
    users = UsersApp(UserRepo(db, memories, removals), removals, after_turn.cancel_user)
    users_pb2_grpc.add_UserServiceServicer_to_server(UserServicer(users), server)
    closers: list[Closer] = [
        after_turn.aclose,  # what is left of the grace period
        _untimed(provider.aclose),
        *([_untimed(embedding.aclose), _untimed(embedder.aclose)] if embedder else []),
        _untimed(events.aclose),
    ]
    retention = RetentionPurger(
        SessionPurge(db, removals),
        removals,
        settings.retention_days,
        busy=lambda session_id: chat.turn_running(session_id) or after_turn.working_on(session_id),
        memories=memories,
    )
    retention.start()
    closers.insert(0, _untimed(retention.aclose))  # first: it writes to the database
    return closers, chat


def _record_after_turn(metrics: PrometheusRecorder, runner: AfterTurnRunner) -> None:
    """The after-turn work's figures, read when scraped: it keeps them anyway."""
    stats = runner.stats
    metrics.gauge(
        "contextd_after_turn_pending",
        "Turns whose after-turn work (memories, summaries) is waiting or running.",
        lambda: runner.pending,
    )
    metrics.counter(
        "contextd_after_turn_failures",
        "After-turn work that failed (each part of a turn's work counts).",
        lambda: stats.failures,
    )
    metrics.counter(
        "contextd_after_turn_dropped",
        "Turns whose after-turn work was refused: too many pending, or shutting down.",
        lambda: stats.dropped,
    )


async def serve(settings: Settings) -> None:
    """Run until SIGINT or SIGTERM, then shut down gracefully."""
    # Handled from before start: a signal right after "listening" is a graceful stop too.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
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

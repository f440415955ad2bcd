"""Composition root, the wiring: every part of the server built through its constructor
on the open database, part by part (the stored records, the apps over them, the
servicers over the apps, the guard). The lifecycle (server.py) runs what this builds;
prepare.py checks the settings first; nothing here listens."""

from __future__ import annotations

import functools
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import grpc.aio
from grpc_health.v1 import health
from grpc_reflection.v1alpha import reflection

from contextd import __version__
from contextd.app.after_turn import AfterTurnRunner, AfterTurnSettings
from contextd.app.chat import ChatApp
from contextd.app.chat.interrupted import InterruptedTurns
from contextd.app.chat.session_lease import SessionTurns
from contextd.app.chat.step_loop import StepLoop
from contextd.app.chat.turn_setup import TurnKit, TurnSetup
from contextd.app.context import ContextApp
from contextd.app.memories import ExpiryDefaults, MemoriesApp
from contextd.app.memory_embedding import search_by_meaning
from contextd.app.prompts import PromptsApp
from contextd.app.retention import RetentionPurger
from contextd.app.session_build_request import LayerDefaults
from contextd.app.session_context import SessionContextBuilder
from contextd.app.sessions import SessionsApp
from contextd.app.users import UsersApp
from contextd.config import Settings
from contextd.core.content import ImageLimits
from contextd.core.tokens import TokenizerRegistry
from contextd.fronts.grpc.auth import Authenticator
from contextd.fronts.grpc.chat_servicer import ChatServicer
from contextd.fronts.grpc.context_servicer import ContextServicer
from contextd.fronts.grpc.convert import PublicIds
from contextd.fronts.grpc.in_process import InProcess
from contextd.fronts.grpc.interceptors import GuardInterceptor, Limits
from contextd.fronts.grpc.limits import RateLimiter, TurnSlots
from contextd.fronts.grpc.session_servicers import MemoryServicer, PromptServicer, SessionServicer
from contextd.fronts.grpc.user_servicer import UserServicer
from contextd.metrics.prometheus import PrometheusRecorder
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.providers.base import Provider
from contextd.providers.embeddings import Embedder
from contextd.providers.registry import api_key_from_env, make_provider
from contextd.root.prepare import Prepared, editing_settings
from contextd.store.catalog import CatalogRepo
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.event_log.events import EventStore
from contextd.store.event_log.removals import LogRemovals
from contextd.store.memory.history import MemoryHistoryRepo
from contextd.store.memory.repository import MemoryRepo
from contextd.store.memory.vectors import MemoryVectorRepo
from contextd.store.open import Store
from contextd.store.partial_answers import PartialAnswerRepo
from contextd.store.retention import SessionPurge
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo
from contextd.store.users import UserRepo
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

# Closes a part of the server given the seconds left of the grace period.
Closer = Callable[[float], Awaitable[None]]
# Adds one servicer to the native server.
Registration = Callable[[grpc.aio.Server], None]

SERVICE_NAMES = (
    context_pb2.DESCRIPTOR.services_by_name["ContextService"].full_name,
    chat_pb2.DESCRIPTOR.services_by_name["ChatService"].full_name,
    sessions_pb2.DESCRIPTOR.services_by_name["SessionService"].full_name,
    memory_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    prompts_pb2.DESCRIPTOR.services_by_name["PromptService"].full_name,
    users_pb2.DESCRIPTOR.services_by_name["UserService"].full_name,
)
STREAM_CHAT = f"/{chat_pb2.DESCRIPTOR.services_by_name['ChatService'].full_name}/StreamChat"


def untimed(close: Callable[[], Awaitable[None]]) -> Closer:
    """A closer that takes no time limit (it finishes at once)."""

    async def closer(_seconds_left: float) -> None:
        await close()

    return closer


class Background(Protocol):
    """Work that runs in the background once started (closed by its closer)."""

    def start(self) -> None: ...


# --- the services, on the open database ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Services:
    """The wired server, for the lifecycle to run."""

    guard: GuardInterceptor  # the native server's interceptor
    registrations: tuple[Registration, ...]
    in_process: InProcess  # the same methods behind the same guard, called in process
    chat: ChatApp  # for the start-up pass over the turns a killed server left open
    metrics: Recorder  # a PrometheusRecorder with a metrics port
    web_peer_secret: str  # what the web port vouches for a browser's address with
    closers: tuple[Closer, ...]  # in order: what writes to the database first
    background: tuple[Background, ...]

    def register(self, server: grpc.aio.Server) -> None:
        for register in self.registrations:
            register(server)

    def start(self) -> None:
        """Start the background work (memory embedding, retention)."""
        for work in self.background:
            work.start()


def build_services(
    settings: Settings, store: Store, prepared: Prepared, ids: PublicIds, *, sweeps: bool = True
) -> Services:
    """Every part of the server on ``store``, each given what it uses when made; ``ids``
    are the message and memory ids callers see. The parts, in order: what records
    metrics, the native port's limits, the stored records, the apps over them, the
    servicers over the apps, and the guard in front of them. ``sweeps``: this process
    runs the passes over the whole database (retention): one worker of a server does."""
    db = store.db
    metrics = _recorder(settings, db)
    limits = _limits(settings, web=prepared.cors is not None)
    stored = _stored(settings, store, prepared.embedder, metrics)
    apps = _apps(settings, db, stored, prepared.tokenizers, metrics)
    authenticator = prepared.authenticator(db) if prepared.authenticator else None
    guard = _guard(settings, authenticator, limits, metrics)
    registrations = _servicers(settings, stored, apps, ids)
    return Services(
        guard=guard,
        registrations=registrations,
        in_process=InProcess(guard, registrations, settings.max_message_bytes),
        chat=apps.chat,
        metrics=metrics,
        web_peer_secret=limits.web_peer_secret,
        # First what writes to the database (retention), then the after-turn work (it
        # still needs the provider and the database), the provider, the embedding, and
        # the event logs last.
        closers=(
            *([untimed(apps.retention.aclose)] if sweeps else []),
            apps.after_turn.aclose,
            untimed(apps.provider.aclose),
            *stored.closers,
            untimed(stored.events.aclose),
        ),
        background=(*stored.background, *([apps.retention] if sweeps else [])),
    )


@dataclass(frozen=True, slots=True)
class _Stored:
    """The stored records' repositories, and the embedding work memories may have."""

    memories: MemoryRepo
    summaries: SummaryRepo
    catalog: CatalogRepo
    conversation: ConversationRepo
    history: MemoryHistoryRepo
    events: EventStore
    background: tuple[Background, ...]  # vectors made for memories, with an embedder
    closers: tuple[Closer, ...]


def _stored(
    settings: Settings, store: Store, embedder: Embedder | None, metrics: Recorder
) -> _Stored:
    db, index = store.db, store.memory_index
    background: tuple[Background, ...] = ()
    closers: tuple[Closer, ...] = ()
    if embedder is None:
        memories = MemoryRepo(
            db, index, half_life_days=settings.memory_half_life_days, metrics=metrics
        )
    else:  # vectors made in the background, used by every memory search
        meaning = search_by_meaning(
            embedder,
            MemoryVectorRepo(db, embedder.model),
            query_timeout=settings.embedding_timeout,
            metrics=metrics,
        )
        memories = MemoryRepo(
            db,
            index,
            half_life_days=settings.memory_half_life_days,
            metrics=metrics,
            meaning=meaning.ranker,
            changed=meaning.worker.wake,
        )
        background = (meaning.worker,)
        closers = (untimed(meaning.worker.aclose), untimed(embedder.aclose))
    return _Stored(
        memories=memories,
        summaries=SummaryRepo(db),
        catalog=CatalogRepo(db),
        conversation=ConversationRepo(db),
        history=MemoryHistoryRepo(db, memories),
        events=store.event_log(),
        background=background,
        closers=closers,
    )


@dataclass(frozen=True, slots=True)
class _Apps:
    """The apps the servicers call, with what the lifecycle closes of them."""

    sessions: SessionsApp
    context: ContextApp
    chat: ChatApp
    users: UsersApp
    provider: Provider
    after_turn: AfterTurnRunner
    retention: RetentionPurger
    image_limits: ImageLimits


def _apps(
    settings: Settings,
    db: Database,
    stored: _Stored,
    tokenizers: TokenizerRegistry,
    metrics: Recorder,
) -> _Apps:
    memories, summaries, conversation = stored.memories, stored.summaries, stored.conversation
    provider = make_provider(
        settings.provider,
        api_key=api_key_from_env(settings.provider),
        base_url=settings.provider_base_url,
        model=settings.provider_model,
        timeout=settings.provider_timeout,
        echo_chunk_delay=settings.echo_delay_ms / 1000,
    )
    partials = PartialAnswerRepo(db, settings.turn_lease_seconds)
    # One turn at a time per session, across the processes sharing the database.
    turns = SessionTurns(
        partials, InterruptedTurns(partials, conversation, stored.events, tokenizers)
    )
    sessions = SessionsApp(
        SessionRepo(db),
        conversation,
        summaries,
        memories,
        tokenizers,
        stored.events,
        turns,
        provider.name,
    )
    builder = _context_builder(settings, sessions, stored, metrics)
    image_limits = ImageLimits(max_image_bytes=settings.max_image_bytes)
    editing = builder.defaults.editing
    context = ContextApp(
        tokenizers, settings.max_history_messages, builder, image_limits, metrics, editing
    )
    # Memories and summaries after each ok turn, in the background.
    after_turn = AfterTurnRunner(
        provider,
        memories,
        summaries,
        conversation,
        stored.history,
        AfterTurnSettings.from_settings(settings),
        metrics,
    )
    if isinstance(metrics, PrometheusRecorder):
        _record_after_turn(metrics, after_turn)
    kit = TurnKit(
        events=stored.events,
        conversation=conversation,
        partials=partials,
        tokenizers=tokenizers,
        builder=builder,
        memories=memories,
        max_prompt_tokens=settings.max_prompt_tokens,
        blank_user_turns=provider.capabilities.carries_blank_user_turns,
        after_turn=after_turn,
        metrics=metrics,
    )
    setup = TurnSetup(
        sessions=sessions,
        conversation=conversation,
        events=stored.events,
        turns=turns,
        kit=kit,
        provider=provider,
        warn_prompt_tokens=settings.warn_prompt_tokens,
    )
    steps = StepLoop(provider, settings.max_steps, metrics)
    chat = ChatApp(setup, steps, turns, stored.events)
    # Event logs of deleted sessions wait in notes here until their deletion committed.
    removals = LogRemovals(db, stored.events, settings.data_dir / "log-removals")
    users = UsersApp(UserRepo(db, memories, removals), removals, after_turn.cancel_user)
    # Expired memories always; sessions with --retention-days. A session with a turn or
    # after-turn work in progress waits for a later pass.
    retention = RetentionPurger(
        SessionPurge(db, removals),
        removals,
        settings.retention_days,
        busy=lambda session_id: chat.turn_running(session_id) or after_turn.working_on(session_id),
        memories=memories,
    )
    return _Apps(sessions, context, chat, users, provider, after_turn, retention, image_limits)


def _context_builder(
    settings: Settings, sessions: SessionsApp, stored: _Stored, metrics: Recorder
) -> SessionContextBuilder:
    defaults = LayerDefaults(
        identity=settings.system_identity,
        rules=settings.system_rules,
        memory_enabled=settings.memory_enabled,
        memory_limit=settings.memory_limit,
        recent_sessions_limit=settings.recent_sessions_limit,
        editing=editing_settings(settings),
    )
    return SessionContextBuilder(
        defaults, sessions, stored.catalog, stored.memories, stored.summaries, metrics
    )


def _servicers(
    settings: Settings, stored: _Stored, apps: _Apps, ids: PublicIds
) -> tuple[Registration, ...]:
    memories = MemoriesApp(
        stored.memories,
        apps.sessions,
        stored.history,
        ExpiryDefaults.parse(settings.memory_expiry_days),
    )
    default_tokenizer = apps.context.tokenizers.default
    servicers: list[tuple[Callable[[Any, grpc.aio.Server], None], object]] = [
        (
            context_pb2_grpc.add_ContextServiceServicer_to_server,
            ContextServicer(apps.context, apps.sessions, ids),
        ),
        (memory_pb2_grpc.add_MemoryServiceServicer_to_server, MemoryServicer(memories, ids)),
        (
            prompts_pb2_grpc.add_PromptServiceServicer_to_server,
            PromptServicer(PromptsApp(stored.catalog)),
        ),
        (
            chat_pb2_grpc.add_ChatServiceServicer_to_server,
            ChatServicer(apps.chat, apps.context, ids),
        ),
        (
            sessions_pb2_grpc.add_SessionServiceServicer_to_server,
            SessionServicer(apps.sessions, default_tokenizer, apps.image_limits, ids),
        ),
        (users_pb2_grpc.add_UserServiceServicer_to_server, UserServicer(apps.users)),
    ]
    return tuple(functools.partial(add, servicer) for add, servicer in servicers)


def _recorder(settings: Settings, db: Database) -> Recorder:
    """What the server records its metrics into: nothing without a metrics port."""
    if settings.metrics_port == 0:
        return NULL_RECORDER
    recorder = PrometheusRecorder(__version__)
    db.time_statements(recorder.statement_observer(db.engine))
    return recorder


def _limits(settings: Settings, web: bool) -> Limits:
    rate = (
        RateLimiter(settings.rate_limit, settings.rate_burst()) if settings.rate_limit > 0 else None
    )
    turns = TurnSlots(settings.max_concurrent_turns) if settings.max_concurrent_turns else None
    return Limits(
        rate,
        turns,
        turn_methods=frozenset({STREAM_CHAT}),
        exempt_services=(health.SERVICE_NAME,),
        # The web port forwards every browser's call from one address: it vouches for
        # the browser's address with this secret, so calls keyed by address stay apart.
        web_peer_secret=secrets.token_urlsafe(24) if web and rate is not None else "",
    )


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

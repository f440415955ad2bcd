"""Composition root, the wiring: the settings checked, what needs no database made, then
every part of the server built through its constructor on the open database. The
lifecycle (server.py) runs what this builds; nothing here listens."""

from __future__ import annotations

import functools
import secrets
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import grpc.aio
from grpc_health.v1 import health
from grpc_reflection.v1alpha import reflection

from contextd import __version__
from contextd.api import auth_modes
from contextd.api.auth import Authenticator
from contextd.api.auth_modes import AuthenticatorFactory, authenticator_factory
from contextd.api.chat_servicer import ChatServicer
from contextd.api.context_servicer import ContextServicer
from contextd.api.ids import PublicIds
from contextd.api.interceptors import GuardInterceptor, Limits
from contextd.api.limits import RateLimiter, TurnSlots
from contextd.api.session_servicers import MemoryServicer, PromptServicer, SessionServicer
from contextd.api.user_servicer import UserServicer
from contextd.app.after_turn import AfterTurnRunner, AfterTurnSettings
from contextd.app.chat import ChatApp, ChatLimits
from contextd.app.context import ContextApp
from contextd.app.memories import ExpiryDefaults, MemoriesApp
from contextd.app.memory_embedding import search_by_meaning
from contextd.app.prompts import PromptsApp
from contextd.app.retention import RetentionPurger
from contextd.app.session_context import LayerDefaults, SessionContextBuilder
from contextd.app.sessions import SessionsApp
from contextd.app.users import UsersApp
from contextd.config import Rule, Settings
from contextd.core.content import ImageLimits
from contextd.core.editing import EditingSettings
from contextd.core.editing.compaction import MAX_PROMPT_CHARS, MAX_TIMEOUT
from contextd.core.editing.settings import MIN_CAP_TOKENS
from contextd.core.pipeline import is_tool_name
from contextd.core.tokens import TokenizerRegistry
from contextd.metrics.prometheus import PrometheusRecorder
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.ports import check_free, listened_ports
from contextd.providers.embeddings import Embedder, make_embedder, unknown_provider
from contextd.providers.registry import api_key_from_env, make_provider
from contextd.store.catalog import CatalogRepo
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.database import Database
from contextd.store.engine.open import database_url_error
from contextd.store.event_log.events import HISTORY_DIR
from contextd.store.event_log.removals import LogRemovals
from contextd.store.memory.history import MemoryHistoryRepo
from contextd.store.memory.repository import MemoryRepo
from contextd.store.memory.vectors import MemoryVectorRepo
from contextd.store.partial_answers import PartialAnswerRepo
from contextd.store.retention import SessionPurge
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo
from contextd.store.users import UserRepo
from contextd.tls import ServerTls
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


# --- what is checked and made before the database opens --------------------------------


def _cors_errors(settings: Settings) -> Iterator[str]:
    if settings.web_port >= 0:
        try:
            CorsPolicy.parse(settings.cors_origins)
        except ValueError as error:
            yield str(error)


def _database_url_errors(settings: Settings) -> Iterator[str]:
    if (error := database_url_error(settings.database_url)) is not None:
        yield error


def _embedding_errors(settings: Settings) -> Iterator[str]:
    if (error := unknown_provider(settings.embedding_provider)) is not None:
        yield error


def _tls_errors(settings: Settings) -> list[str]:
    return ServerTls.missing_files(settings.tls_cert, settings.tls_key, settings.tls_client_ca)


def _editing(settings: Settings) -> EditingSettings:
    """The server's editing defaults, which a request's unset fields take."""
    return EditingSettings(
        cap_tokens=settings.tool_result_cap_tokens,
        clear_trigger_tokens=settings.clear_trigger_tokens,
        keep_tool_results=settings.keep_tool_results,
        clear_at_least_tokens=settings.clear_at_least_tokens,
        clear_tool_inputs=settings.clear_tool_inputs,
        exclude_tools=frozenset(
            t.strip() for t in settings.clear_exclude_tools.split(",") if t.strip()
        ),
    )


def _editing_errors(settings: Settings) -> Iterator[str]:
    cap = settings.tool_result_cap_tokens
    if 0 < cap < MIN_CAP_TOKENS:
        yield f"--tool-result-cap-tokens must be 0 (no cap) or at least {MIN_CAP_TOKENS}, not {cap}"
    bad = sorted(t for t in _editing(settings).exclude_tools if not is_tool_name(t))
    if bad:
        yield (
            f"--clear-exclude-tools names {', '.join(map(repr, bad))}: a tool name is 1-64 "
            "letters, digits, '_' or '-'"
        )


def _memory_expiry_errors(settings: Settings) -> Iterator[str]:
    try:
        ExpiryDefaults.parse(settings.memory_expiry_days)
    except ValueError as error:
        yield str(error)


def _compaction_errors(settings: Settings) -> Iterator[str]:
    timeout = settings.compaction_timeout
    if not 0 < timeout <= MAX_TIMEOUT:  # False for NaN too
        yield (
            f"--compaction-timeout must be above 0 and at most {MAX_TIMEOUT:g} seconds, "
            f"not {timeout}"
        )
    if len(settings.compaction_prompt) > MAX_PROMPT_CHARS:
        yield f"--compaction-prompt must be at most {MAX_PROMPT_CHARS} characters"


# The settings' rules that other modules know, checked with the settings' own.
SETTINGS_RULES: tuple[Rule, ...] = (
    auth_modes.settings_errors,
    _compaction_errors,
    _cors_errors,
    _database_url_errors,
    _editing_errors,
    _embedding_errors,
    _memory_expiry_errors,
    _tls_errors,
)


@dataclass(frozen=True, slots=True)
class Prepared:
    """What the settings make before the database opens."""

    tokenizers: TokenizerRegistry
    authenticator: AuthenticatorFactory | None  # None: --auth none
    embedder: Embedder | None  # None: no search by meaning
    tls: ServerTls | None  # None: plain text
    cors: CorsPolicy | None  # None: the web port is off


def prepare(settings: Settings) -> Prepared:
    """Every settings error at once, then what reads files (the tokenizer, JWT keys, the
    local embedding model, TLS files), each of which may stop the start: all before
    anything starts (SystemExit with the reason). Every port is checked free in between:
    a port another process listens on is never shared (ports.py)."""
    settings.check(*SETTINGS_RULES)
    check_free(listened_ports(settings))
    tokenizers = TokenizerRegistry(settings.default_tokenizer)
    tokenizers.get(settings.default_tokenizer)  # fail at start-up, not on the first call
    authenticator = authenticator_factory(settings)
    try:
        embedder = make_embedder(
            settings.embedding_provider,
            settings.embedding_model,
            settings.embedding_base_url,
            timeout=settings.embedding_timeout,
        )
    except ValueError as error:  # the local model is not installed, say
        raise SystemExit(str(error)) from None
    return Prepared(
        tokenizers,
        authenticator,
        embedder,
        ServerTls.load(settings.tls_cert, settings.tls_key, settings.tls_client_ca),
        CorsPolicy.parse(settings.cors_origins) if settings.web_port >= 0 else None,
    )


# --- the services, on the open database ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Services:
    """The wired server, for the lifecycle to run."""

    guard: GuardInterceptor  # the native server's interceptor
    registrations: tuple[Registration, ...]
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
    settings: Settings, db: Database, prepared: Prepared, ids: PublicIds, *, sweeps: bool = True
) -> Services:
    """Every part of the server on ``db``, each given what it uses when made; ``ids``
    are the message and memory ids callers see (``public_ids(db)``). ``sweeps``: this
    process runs the passes over the whole database (retention): one worker of a server
    does."""
    metrics = _recorder(settings, db)
    limits = _limits(settings, web=prepared.cors is not None)
    authenticator = prepared.authenticator(db) if prepared.authenticator else None
    background: list[Background] = []
    closers: list[Closer] = []
    embedder = prepared.embedder
    if embedder is None:
        memories = MemoryRepo(db, half_life_days=settings.memory_half_life_days, metrics=metrics)
    else:  # vectors made in the background, used by every memory search
        meaning = search_by_meaning(
            embedder,
            MemoryVectorRepo(db, embedder.model),
            query_timeout=settings.embedding_timeout,
            metrics=metrics,
        )
        memories = MemoryRepo(
            db,
            half_life_days=settings.memory_half_life_days,
            metrics=metrics,
            meaning=meaning.ranker,
            changed=meaning.worker.wake,
        )
        background.append(meaning.worker)
        closers += [untimed(meaning.worker.aclose), untimed(embedder.aclose)]
    tokenizers = prepared.tokenizers
    summaries = SummaryRepo(db)
    catalog = CatalogRepo(db)
    events = db.event_log(settings.data_dir / HISTORY_DIR)
    conversation = ConversationRepo(db)
    sessions = SessionsApp(SessionRepo(db), conversation, summaries, memories, tokenizers, events)
    editing = _editing(settings)
    defaults = LayerDefaults(
        identity=settings.system_identity,
        rules=settings.system_rules,
        memory_enabled=settings.memory_enabled,
        memory_limit=settings.memory_limit,
        recent_sessions_limit=settings.recent_sessions_limit,
        editing=editing,
    )
    builder = SessionContextBuilder(defaults, sessions, catalog, memories, summaries)
    image_limits = ImageLimits(max_image_bytes=settings.max_image_bytes)
    limit = settings.max_history_messages
    context = ContextApp(tokenizers, limit, builder, image_limits, metrics, editing)
    provider = make_provider(
        settings.provider,
        api_key=api_key_from_env(settings.provider),
        base_url=settings.provider_base_url,
        model=settings.provider_model,
        timeout=settings.provider_timeout,
        echo_chunk_delay=settings.echo_delay_ms / 1000,
    )
    history = MemoryHistoryRepo(db, memories)
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
        partials=PartialAnswerRepo(db, settings.turn_lease_seconds),
        tokenizers=tokenizers,
        builder=builder,
        memories=memories,
        provider=provider,
        limits=ChatLimits(
            settings.max_prompt_tokens, settings.warn_prompt_tokens, settings.max_steps
        ),
        after_turn=after_turn,
        metrics=metrics,
    )
    if isinstance(metrics, PrometheusRecorder):
        _record_after_turn(metrics, after_turn)
    # Event logs of deleted sessions wait in notes here until their deletion committed.
    removals = LogRemovals(db, events, settings.data_dir / "log-removals")
    users = UsersApp(UserRepo(db, memories, removals), removals, after_turn.cancel_user)
    closers = [after_turn.aclose, untimed(provider.aclose), *closers, untimed(events.aclose)]
    # Expired memories always; sessions with --retention-days. A session with a turn or
    # after-turn work in progress waits for a later pass.
    retention = RetentionPurger(
        SessionPurge(db, removals),
        removals,
        settings.retention_days,
        busy=lambda session_id: chat.turn_running(session_id) or after_turn.working_on(session_id),
        memories=memories,
    )
    if sweeps:
        background.append(retention)
        closers.insert(0, untimed(retention.aclose))  # first: it writes to the database
    servicers: list[tuple[Callable[[Any, grpc.aio.Server], None], object]] = [
        (
            context_pb2_grpc.add_ContextServiceServicer_to_server,
            ContextServicer(context, sessions, ids),
        ),
        (
            memory_pb2_grpc.add_MemoryServiceServicer_to_server,
            MemoryServicer(
                MemoriesApp(
                    memories, sessions, history, ExpiryDefaults.parse(settings.memory_expiry_days)
                ),
                ids,
            ),
        ),
        (prompts_pb2_grpc.add_PromptServiceServicer_to_server, PromptServicer(PromptsApp(catalog))),
        (chat_pb2_grpc.add_ChatServiceServicer_to_server, ChatServicer(chat, context, ids)),
        (
            sessions_pb2_grpc.add_SessionServiceServicer_to_server,
            SessionServicer(sessions, tokenizers.default, chat, image_limits, ids),
        ),
        (users_pb2_grpc.add_UserServiceServicer_to_server, UserServicer(users)),
    ]
    return Services(
        guard=_guard(settings, authenticator, limits, metrics),
        registrations=tuple(functools.partial(add, servicer) for add, servicer in servicers),
        chat=chat,
        metrics=metrics,
        web_peer_secret=limits.web_peer_secret,
        closers=tuple(closers),
        background=tuple(background),
    )


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

"""Composition root, before anything starts: every settings rule checked at once (the
settings' own and those only other modules know), then what reads files (the tokenizer,
JWT keys, the local embedding model, TLS files), each of which may stop the start."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from contextd.app.memories import ExpiryDefaults
from contextd.config import Rule, Settings
from contextd.core.editing import EditingSettings
from contextd.core.editing.compaction import MAX_PROMPT_CHARS, MAX_TIMEOUT
from contextd.core.editing.settings import MIN_CAP_TOKENS
from contextd.core.pipeline import is_tool_name
from contextd.core.tokens import TokenizerRegistry
from contextd.fronts.grpc.api_key_auth import ApiKeyAuthenticator
from contextd.fronts.grpc.auth import Authenticator
from contextd.fronts.grpc.auth_modes import settings_errors
from contextd.fronts.web.cors import CorsPolicy
from contextd.providers.embeddings import Embedder, make_embedder, unknown_provider
from contextd.root.ports import check_free, listened_ports
from contextd.root.tls import ServerTls
from contextd.store.api_keys import ApiKeyRepo
from contextd.store.engine.database import Database
from contextd.store.engine.open import database_url_error

# What an --auth mode needs to check credentials, given the open database.
AuthenticatorFactory = Callable[[Database], Authenticator]


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


def editing_settings(settings: Settings) -> EditingSettings:
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
    bad = sorted(t for t in editing_settings(settings).exclude_tools if not is_tool_name(t))
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
    settings_errors,
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


def authenticator_factory(settings: Settings) -> AuthenticatorFactory | None:
    """The authenticator ``settings.auth`` asks for (``settings_errors`` found none);
    None for ``none``. With ``jwt``, SystemExit naming the flag when its keys cannot be
    had."""
    if settings.auth == "none":
        return None
    if settings.auth == "api-key":
        return _api_keys
    if settings.auth == "jwt":
        # Imported here: PyJWT and its cryptography (about 20 MB resident) load only
        # for a server that checks tokens.
        from contextd.fronts.grpc.jwt_auth import JwtAuthenticator

        try:
            tokens = JwtAuthenticator.from_settings(settings)
        except ValueError as error:
            raise SystemExit(str(error)) from None
        return lambda db: tokens
    raise ValueError(f"--auth {settings.auth!r} is not a mode")  # settings_errors said so


def _api_keys(db: Database) -> Authenticator:
    keys = ApiKeyAuthenticator(ApiKeyRepo(db))
    db.user_erased.append(keys.forget_user)  # their keys are refused at once
    return keys

"""Server settings: built-in defaults, overridden by CONTEXTD_* variables, then by flags.

A setting is a field of ``Settings`` declared with ``_setting(default, help, check)``: its
flag (``--data-dir`` for ``data_dir``) and variable (``CONTEXTD_DATA_DIR``) follow from its
name, and ``check`` is what its value alone must satisfy. ``Settings.check`` reports every
error at once: each field's, the rules between fields (``Settings._between_fields``), and
the rules the composition root adds for what only other modules know (root/prepare.py). The
settings are a leaf: they import nothing else of contextd.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

ENV_PREFIX = "CONTEXTD_"

# What is wrong with a setting's value, said after its flag ("must not be negative"),
# or None when nothing is.
Check = Callable[[Any], str | None]
# Errors of the settings as a whole, each a full sentence naming its flags.
Rule = Callable[["Settings"], Iterable[str]]

# A minute between deltas is already more than anyone watching waits for.
MAX_ECHO_DELAY_MS = 60_000
# A turn renews its session's lease every quarter of it, at most once a second
# (app/chat/recorder.py): the lease must outlast a late renewal, or a busy replica
# loses its turn to another.
MIN_TURN_LEASE_SECONDS = 2.0
# Worker processes one server may run (--workers).
MAX_WORKERS = 256


class SettingsError(SystemExit):
    """Settings that cannot work: every error, one a line (the exit message)."""

    def __init__(self, errors: Iterable[str]) -> None:
        self.errors = tuple(errors)
        super().__init__("\n".join(self.errors))


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "contextd"


def _setting(default: object, help: str, check: Check | None = None) -> Any:
    """A field with the help text its command-line flag shows, and the check its value
    must pass."""
    metadata = {"help": help, "check": check}
    if callable(default):
        return field(default_factory=default, metadata=metadata)
    return field(default=default, metadata=metadata)


def _within(lowest: float, highest: float, unit: str = "") -> Check:
    def check(value: float) -> str | None:
        if lowest <= value <= highest:  # False for NaN too
            return None
        return f"must be from {lowest} to {highest}{' ' + unit if unit else ''}, not {value}"

    return check


def _port(off: bool = False) -> Check:
    """A TCP port, 0 for any free one, and -1 when ``off`` turns the listener off."""
    return _within(-1 if off else 0, 65535)


def _not_negative(value: float) -> str | None:
    return None if value >= 0 else "must not be negative"


def _at_least_one(value: int) -> str | None:
    return None if value >= 1 else f"must be at least 1, not {value}"


def _days(value: float) -> str | None:
    if math.isfinite(value) and value >= 0:
        return None
    return "must be 0 (keep forever) or a positive number of days"


def _workers(value: str) -> str | None:
    if value == "auto" or (value.isdigit() and 1 <= int(value) <= MAX_WORKERS):
        return None
    return f"must be auto or a number from 1 to {MAX_WORKERS}, not {value!r}"


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity, bounded by a cgroup's CPU
    quota where one is set (a container's --cpus)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
    except (OSError, ValueError):
        quota = "max"
    if quota != "max":
        cores = min(cores or 1, max(1, math.ceil(int(quota) / int(period))))
    return max(1, cores or 1)


def _lease(value: float) -> str | None:
    if math.isfinite(value) and value >= MIN_TURN_LEASE_SECONDS:
        return None
    return (
        f"must be at least {MIN_TURN_LEASE_SECONDS:g} seconds (a turn renews its lease once "
        f"a second), not {value}"
    )


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = _setting("127.0.0.1", "address to listen on; 0.0.0.0 for every interface")
    port: int = _setting(50151, "port to listen on, 0 for any free port", _port())
    data_dir: Path = _setting(  # noqa: RUF009 - becomes a default_factory
        default_data_dir, "where contextd keeps its database and logs"
    )
    default_tokenizer: str = _setting("cl100k_base", "tokenizer used when a request names none")
    max_message_bytes: int = _setting(16 * 1024 * 1024, "largest request or response")
    max_history_messages: int = _setting(100_000, "most history messages one request may carry")
    max_image_bytes: int = _setting(
        5 * 1024 * 1024, "largest inline image of a message part (under --max-message-bytes)"
    )
    max_concurrent_rpcs: int = _setting(1000, "calls served at once")
    workers: str = _setting(
        "1",
        "processes serving the ports, started by one parent: a number, or auto for one per "
        "core this process may use",
        _workers,
    )
    shutdown_grace: float = _setting(
        10.0, "seconds the whole shutdown may take on SIGINT/SIGTERM, --drain-delay included"
    )
    drain_delay: float = _setting(
        0.0, "seconds health reports NOT_SERVING while calls are still served, at shutdown"
    )
    log_level: str = _setting("INFO", "DEBUG, INFO, WARNING or ERROR")
    system_identity: str = _setting(
        "You are a helpful assistant.", "session mode's system layer: who the model is"
    )
    system_rules: str = _setting("", "session mode's system layer: rules for every answer")
    memory_enabled: bool = _setting(True, "fill the memory and recent_sessions layers (true/false)")
    memory_limit: int = _setting(5, "memories considered for the memory layer")
    recent_sessions_limit: int = _setting(3, "other sessions' summaries for recent_sessions")
    memory_half_life_days: float = _setting(30.0, "days for a memory's recency weight to halve")
    memory_expiry_days: str = _setting(
        "",
        "days a scope's memories are kept when AddMemory gives no expiry, e.g. "
        "app:word=30,agent:planner=7; empty: kept until deleted",
    )
    provider: str = _setting("echo", "model provider: echo (offline), openai or anthropic")
    provider_model: str = _setting("", "model name; empty for the provider's default")
    provider_base_url: str = _setting(
        "", "API base URL, e.g. an Ollama or vLLM server for openai; empty for the default"
    )
    provider_timeout: float = _setting(60.0, "seconds a model call may take")
    echo_delay_ms: int = _setting(
        0,
        "with --provider echo: milliseconds between streamed deltas (0 to 60000), "
        "to watch streaming and cancelling; 0 streams at once",
        _within(0, MAX_ECHO_DELAY_MS, "milliseconds"),
    )
    embedding_provider: str = _setting(
        "local",
        "memory search by meaning: local (a multilingual model run on the CPU, shipped "
        "with the server, loaded on the first memory call), openai (any "
        "OpenAI-compatible /embeddings endpoint) or none (terms and recency only)",
    )
    embedding_model: str = _setting(
        "", "embedding model; empty for the provider's default (openai: text-embedding-3-small)"
    )
    embedding_base_url: str = _setting(
        "", "embeddings API base URL for --embedding-provider openai; empty for OpenAI's"
    )
    embedding_timeout: float = _setting(10.0, "seconds one embedding call may take")
    max_prompt_tokens: int = _setting(8000, "most prompt tokens a chat turn sends")
    warn_prompt_tokens: int = _setting(6000, "prompt tokens over which a turn warns")
    max_steps: int = _setting(
        100, "model calls per turn, server-side tools included", _at_least_one
    )
    tool_result_cap_tokens: int = _setting(
        0,
        "most tokens one tool result keeps, head and tail around a marker; 0 for no cap",
        _not_negative,
    )
    clear_trigger_tokens: int = _setting(
        0,
        "history tokens over which old tool results are cleared to a placeholder; 0: never",
        _not_negative,
    )
    keep_tool_results: int = _setting(
        3, "newest tool results that are never cleared", _not_negative
    )
    clear_at_least_tokens: int = _setting(
        4000,
        "a clearing step frees at least this many tokens, or waits (keeps caches hitting)",
        _not_negative,
    )
    clear_tool_inputs: bool = _setting(
        False, "clearing a tool result also replaces its call's arguments with a note"
    )
    clear_exclude_tools: str = _setting(
        "", "tools whose results are never cleared, comma-separated"
    )
    compaction_trigger_tokens: int = _setting(
        0,
        "compact a session after a turn when the messages its summary does not cover are "
        "over this many tokens; 0: by --compaction-trigger-share only",
        _not_negative,
    )
    compaction_trigger_share: float = _setting(
        0.75,
        "the same trigger as a share of the turn's token budget (0 to 1; 0: off)",
        _within(0, 1),
    )
    compaction_keep_messages: int = _setting(
        10, "newest messages a compaction keeps verbatim", _at_least_one
    )
    compaction_keep_turns: int = _setting(
        0, "newest turns a compaction keeps verbatim instead, when above 0", _not_negative
    )
    compaction_model: str = _setting(
        "", "model that writes compaction summaries; empty for --provider-model"
    )
    compaction_prompt: str = _setting(
        "", "instructions for the compaction summary, instead of the built-in ones"
    )
    compaction_timeout: float = _setting(
        30.0, "seconds the compaction summary may take before an extract is used"
    )
    database_url: str = _setting(
        "",
        "PostgreSQL URL (postgresql://user:password@host:5432/db); "
        "empty for SQLite in the data directory",
    )
    database_pool_size: int = _setting(10, "PostgreSQL connections this server opens at most")
    database_statement_timeout: float = _setting(
        30.0, "seconds a PostgreSQL statement may run (its statement_timeout)"
    )
    database_pool_timeout: float = _setting(
        5.0, "seconds a call waits for a free PostgreSQL connection before it fails UNAVAILABLE"
    )
    sqlite_synchronous: str = _setting(
        "NORMAL", "NORMAL survives a process crash, FULL also a power cut"
    )
    metrics_port: int = _setting(
        0, "HTTP port serving GET /metrics in the Prometheus text format; 0 for none", _port()
    )
    metrics_host: str = _setting("", "address for the metrics port; empty for the same as --host")
    web_port: int = _setting(
        -1,
        "HTTP/1.1 port for gRPC-Web and Connect (browsers, .NET Framework): "
        "-1 off, 0 any free port",
        _port(off=True),
    )
    web_host: str = _setting("", "address for the web port; empty for the same as --host")
    web_max_connections: int = _setting(
        1000, "web port (and MCP port) connections open at once; more are answered 503"
    )
    web_body_timeout: float = _setting(
        30.0, "seconds a request body may take to arrive on the web port"
    )
    web_max_buffered_bytes: int = _setting(
        256 * 1024 * 1024, "request bytes the web port holds for all calls together"
    )
    openai_api: bool = _setting(
        False,
        "serve the OpenAI-compatible API (/v1/chat/completions, /v1/models) on the web "
        "port (needs --web-port)",
    )
    anthropic_api: bool = _setting(
        False,
        "serve Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens) on the "
        "web port (needs --web-port)",
    )
    mcp_port: int = _setting(
        -1,
        "HTTP port serving MCP (streamable HTTP at /mcp): -1 off, 0 any free port",
        _port(off=True),
    )
    mcp_host: str = _setting("", "address for the MCP port; empty for the same as --host")
    cors_origins: str = _setting(
        "",
        "browser origins allowed on the web port, comma-separated "
        "(e.g. https://localhost:3000); * for any; empty for none",
    )
    auth: str = _setting(
        "none",
        "who may call: none (anyone who reaches the port), api-key (a bearer key made "
        "with `contextd keys create`) or jwt (an OpenID Connect token, see --jwt-*)",
    )
    allow_unauthenticated: bool = _setting(
        False, "let --auth none listen on an address other than loopback"
    )
    auth_protect_reflection: bool = _setting(
        False, "reflection needs a credential too (health stays open)"
    )
    jwt_jwks: str = _setting(
        "", "with --auth jwt: the token signing keys (JWKS), a file path or an https URL"
    )
    jwt_issuer: str = _setting(
        "", "with --auth jwt: the tokens' issuer (iss), comma-separated for several"
    )
    jwt_audience: str = _setting(
        "", "with --auth jwt: the tokens' audience (aud), comma-separated for several"
    )
    jwt_user_claim: str = _setting(
        "sub", "with --auth jwt: the claim naming the user; oid for Microsoft Entra ID"
    )
    jwt_tenant_claim: str = _setting(
        "tid", "with --auth jwt: the claim naming the tenant; empty: all in the default tenant"
    )

    tls_cert: str = _setting(
        "", "PEM certificate chain: both ports serve TLS (with --tls-key); empty for plain text"
    )
    tls_key: str = _setting("", "PEM private key of --tls-cert (unencrypted)")
    tls_client_ca: str = _setting(
        "", "PEM CA certificates: clients must present a certificate it signed (mutual TLS)"
    )
    rate_limit: float = _setting(
        0.0,
        "requests per second per credential (with --auth none: per user the request names, "
        "else per client address); 0 for no limit",
    )
    rate_limit_burst: float = _setting(
        0.0, "requests a credential may make at once above --rate-limit; 0 for twice the rate"
    )
    max_concurrent_turns: int = _setting(
        0, "StreamChat turns one user may have running at once; 0 for no limit", _not_negative
    )
    retention_days: float = _setting(
        0.0,
        "purge sessions without activity for this many days, with their messages, "
        "summaries and event logs (memories stay); 0 keeps them forever",
        _days,
    )
    turn_lease_seconds: float = _setting(
        15.0,
        "with PostgreSQL replicas: seconds a turn holds its session without renewing the "
        "lease; a replica's turn cut off by its end is closed by another this long after "
        f"(at least {MIN_TURN_LEASE_SECONDS:g})",
        _lease,
    )

    def listen_hosts(self) -> list[str]:
        """The addresses the server listens on: the native port's, and the web and MCP
        ports' when they are on."""
        hosts = [self.host]
        if self.web_port >= 0:
            hosts.append(self.web_host or self.host)
        if self.mcp_port >= 0:
            hosts.append(self.mcp_host or self.host)
        return hosts

    def worker_count(self) -> int:
        """The worker processes ``--workers`` asks for (``auto``: one per usable core)."""
        return usable_cores() if self.workers == "auto" else int(self.workers)

    def rate_burst(self) -> float:
        """The requests a credential may make at once: ``--rate-limit-burst``, else twice
        the rate."""
        return self.rate_limit_burst or 2 * self.rate_limit

    def check(self, *rules: Rule) -> None:
        """Raise SettingsError naming every error of these settings at once: each field's
        own check, the rules between fields, then ``rules`` (what other modules know: the
        composition root passes them)."""
        errors = [
            *self._field_errors(),
            *self._between_fields(),
            *(error for rule in rules for error in rule(self)),
        ]
        if errors:
            raise SettingsError(errors)

    def _field_errors(self) -> Iterator[str]:
        for f in fields(self):
            check: Check | None = f.metadata["check"]
            wrong = check(getattr(self, f.name)) if check is not None else None
            if wrong is not None:
                yield f"{_flag(f.name)} {wrong}"

    def _between_fields(self) -> Iterator[str]:
        if self.rate_limit < 0 or self.rate_limit_burst < 0:
            yield "--rate-limit and --rate-limit-burst must not be negative"
        elif self.rate_limit > 0 and self.rate_burst() < 1:
            yield "--rate-limit-burst must be at least 1 (one request)"
        if self.openai_api and self.web_port < 0:
            yield "--openai-api is served on the web port: set --web-port too"
        if self.anthropic_api and self.web_port < 0:
            yield "--anthropic-api is served on the web port: set --web-port too"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: object) -> Settings:
        """The settings of ``CONTEXTD_*`` variables, ``overrides`` (the flags given) on top;
        SettingsError naming every variable that does not parse."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        errors: list[str] = []
        for f in fields(cls):
            variable = ENV_PREFIX + f.name.upper()
            raw = env.get(variable)
            if raw is None:
                continue
            try:
                values[f.name] = _parse(f.name, raw)
            except ValueError:
                errors.append(_not_valid(variable, f.name, raw))
        if errors:
            raise SettingsError(errors)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _parse(name: str, raw: str) -> object:
    """``raw`` as the setting's type; ValueError when it is not one."""
    kind = _FIELD_TYPES[name]
    if kind == "bool":
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(raw)
    if kind == "Path":
        return Path(raw).expanduser()
    if kind == "int":
        return int(raw)
    if kind == "float":
        return float(raw)
    return raw


def _not_valid(label: str, name: str, raw: str) -> str:
    """The error of a value of ``name`` that does not parse; ``label`` says where it came
    from (its variable or flag)."""
    return f"{label}={raw!r} is not a valid {_FIELD_TYPES[name]}"


# Field annotations are strings here (postponed evaluation): "int", "Path", ...
_FIELD_TYPES = {f.name: str(f.type) for f in fields(Settings)}


def _converter(name: str) -> Callable[[str], object]:
    def convert(raw: str) -> object:
        try:
            return _parse(name, raw)
        except ValueError:
            # Not argparse's own message: the same words as for a variable.
            raise SettingsError([_not_valid(_flag(name), name, raw)]) from None

    return convert


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting, ``--data-dir`` for ``data_dir``; unset flags stay None."""
    for f in fields(Settings):
        default = f.default if f.default is not MISSING else "$XDG_DATA_HOME/contextd"
        is_bool = _FIELD_TYPES[f.name] == "bool"
        parser.add_argument(
            _flag(f.name),
            dest=f.name,
            metavar=_FIELD_TYPES[f.name].upper(),
            type=_converter(f.name),
            # A bool flag alone means true: ``--allow-unauthenticated``.
            nargs="?" if is_bool else None,
            const=True if is_bool else None,
            help=f"{f.metadata['help']} (default: {default}; env {ENV_PREFIX}{f.name.upper()})",
        )

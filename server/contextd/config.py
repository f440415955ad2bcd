"""Server settings: built-in defaults, overridden by CONTEXTD_* variables, then by flags."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

ENV_PREFIX = "CONTEXTD_"


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "contextd"


def _setting(default: object, help: str) -> Any:
    """A field with the help text its command-line flag shows."""
    if callable(default):
        return field(default_factory=default, metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = _setting("127.0.0.1", "address to listen on; 0.0.0.0 for every interface")
    port: int = _setting(50151, "port to listen on, 0 for any free port")
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
    )
    embedding_provider: str = _setting(
        "none",
        "memory search by meaning: none (terms and recency only), openai (any "
        "OpenAI-compatible /embeddings endpoint) or local (a multilingual model run on "
        "the CPU, shipped with the server)",
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
    max_steps: int = _setting(4, "model calls per turn, server-side tools included")
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
        0, "HTTP port serving GET /metrics in the Prometheus text format; 0 for none"
    )
    metrics_host: str = _setting("", "address for the metrics port; empty for the same as --host")
    web_port: int = _setting(
        -1,
        "HTTP/1.1 port for gRPC-Web and Connect (browsers, .NET Framework): "
        "-1 off, 0 any free port",
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
    mcp_port: int = _setting(
        -1, "HTTP port serving MCP (streamable HTTP at /mcp): -1 off, 0 any free port"
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
        0, "StreamChat turns one user may have running at once; 0 for no limit"
    )
    retention_days: float = _setting(
        0.0,
        "purge sessions without activity for this many days, with their messages, "
        "summaries and event logs (memories stay); 0 keeps them forever",
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

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: object) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for f in fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is not None:
                values[f.name] = _parse(f.name, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def _parse(name: str, raw: str, label: str = "") -> object:
    """``raw`` as the setting's type; ``label`` names where it came from in errors."""
    label = label or f"{ENV_PREFIX}{name.upper()}"
    kind = _FIELD_TYPES[name]
    if kind == "bool":
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise SystemExit(f"{label}={raw!r} is not a valid bool")
    if kind == "Path":
        return Path(raw).expanduser()
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        raise SystemExit(f"{label}={raw!r} is not a valid {kind}") from None
    return raw


# Field annotations are strings here (postponed evaluation): "int", "Path", ...
_FIELD_TYPES = {f.name: str(f.type) for f in fields(Settings)}


def _converter(name: str) -> Callable[[str], object]:
    return lambda raw: _parse(name, raw, "--" + name.replace("_", "-"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting, ``--data-dir`` for ``data_dir``; unset flags stay None."""
    for f in fields(Settings):
        default = f.default if f.default is not MISSING else "$XDG_DATA_HOME/contextd"
        is_bool = _FIELD_TYPES[f.name] == "bool"
        parser.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f.name,
            metavar=_FIELD_TYPES[f.name].upper(),
            type=_converter(f.name),
            # A bool flag alone means true: ``--allow-unauthenticated``.
            nargs="?" if is_bool else None,
            const=True if is_bool else None,
            help=f"{f.metadata['help']} (default: {default}; env {ENV_PREFIX}{f.name.upper()})",
        )

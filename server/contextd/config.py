"""Server settings: built-in defaults, overridden by CONTEXTD_* variables, then by flags."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

ENV_PREFIX = "CONTEXTD_"


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "contextd"


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 50151
    data_dir: Path = field(default_factory=default_data_dir)
    default_tokenizer: str = "cl100k_base"
    # Largest request or response the server accepts or sends.
    max_message_bytes: int = 16 * 1024 * 1024
    # Most history messages one request may carry.
    max_history_messages: int = 100_000
    max_concurrent_rpcs: int = 1000
    # Seconds in-flight calls get to finish on SIGINT/SIGTERM.
    shutdown_grace: float = 10.0
    log_level: str = "INFO"
    # Layer [0] of session-mode builds: the server's own identity and rules.
    system_identity: str = "You are a helpful assistant."
    system_rules: str = ""
    # Memories [3] and recent-session summaries [4] in session mode.
    memory_enabled: bool = True
    memory_limit: int = 5
    recent_sessions_limit: int = 3
    # How fast a memory's recency weight halves, in days.
    memory_half_life_days: float = 30.0
    # SQLite synchronous mode: NORMAL survives a process crash, FULL also a power cut.
    sqlite_synchronous: str = "NORMAL"

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


def _parse(name: str, raw: str) -> object:
    kind = _FIELD_TYPES[name]
    if kind == "bool":
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise SystemExit(f"{ENV_PREFIX}{name.upper()}={raw!r} is not a valid bool")
    if kind == "Path":
        return Path(raw).expanduser()
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        raise SystemExit(f"{ENV_PREFIX}{name.upper()}={raw!r} is not a valid {kind}") from None
    return raw


# Field annotations are strings here (postponed evaluation): "int", "Path", ...
_FIELD_TYPES = {f.name: str(f.type) for f in fields(Settings)}

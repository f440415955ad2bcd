"""Settings: defaults, CONTEXTD_* variables, flags on top, clear errors for bad values."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from contextd.config import MIN_TURN_LEASE_SECONDS, Settings, SettingsError, add_arguments
from contextd.root.prepare import SETTINGS_RULES


def parse_flags(*argv: str) -> dict[str, object]:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return vars(parser.parse_args(argv))


def test_environment_then_flags() -> None:
    env = {"CONTEXTD_PORT": "6000", "CONTEXTD_MEMORY_ENABLED": "off", "CONTEXTD_DATA_DIR": "/d"}
    settings = Settings.from_env(env, **parse_flags("--port", "7000"))
    assert settings.port == 7000  # the flag wins
    assert settings.memory_enabled is False
    assert settings.data_dir == Path("/d")
    assert settings.host == "127.0.0.1"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CONTEXTD_PORT": "x"}, "CONTEXTD_PORT='x' is not a valid int"),
        (
            {"CONTEXTD_MEMORY_ENABLED": "maybe"},
            "CONTEXTD_MEMORY_ENABLED='maybe' is not a valid bool",
        ),
        (
            {"CONTEXTD_SHUTDOWN_GRACE": "soon"},
            "CONTEXTD_SHUTDOWN_GRACE='soon' is not a valid float",
        ),
    ],
)
def test_bad_environment_values(env: dict[str, str], message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        Settings.from_env(env)


def test_bad_flag_value_names_the_flag() -> None:
    with pytest.raises(SystemExit, match="--memory-limit='lots' is not a valid int"):
        parse_flags("--memory-limit", "lots")


def test_every_bad_variable_is_named_at_once() -> None:
    env = {"CONTEXTD_PORT": "x", "CONTEXTD_MEMORY_ENABLED": "maybe"}
    with pytest.raises(SettingsError) as refused:
        Settings.from_env(env)
    assert refused.value.errors == (
        "CONTEXTD_PORT='x' is not a valid int",
        "CONTEXTD_MEMORY_ENABLED='maybe' is not a valid bool",
    )


def test_good_settings_pass_their_check() -> None:
    Settings().check()
    Settings(port=0, web_port=0, mcp_port=0, metrics_port=9100, openai_api=True).check()
    Settings(rate_limit=0.5, turn_lease_seconds=MIN_TURN_LEASE_SECONDS).check()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"port": 70000}, "--port must be from 0 to 65535, not 70000"),
        ({"web_port": -2}, "--web-port must be from -1 to 65535, not -2"),
        ({"mcp_port": 70000}, "--mcp-port must be from -1 to 65535, not 70000"),
        ({"metrics_port": -1}, "--metrics-port must be from 0 to 65535, not -1"),
        (
            {"echo_delay_ms": 60001},
            "--echo-delay-ms must be from 0 to 60000 milliseconds, not 60001",
        ),
        ({"rate_limit": -1.0}, "--rate-limit and --rate-limit-burst must not be negative"),
        ({"rate_limit_burst": -1.0}, "--rate-limit and --rate-limit-burst must not be negative"),
        ({"rate_limit": 0.2}, "--rate-limit-burst must be at least 1 (one request)"),
        ({"max_concurrent_turns": -1}, "--max-concurrent-turns must not be negative"),
        (
            {"retention_days": float("nan")},
            "--retention-days must be 0 (keep forever) or a positive number of days",
        ),
        (
            {"turn_lease_seconds": 1.5},
            "--turn-lease-seconds must be at least 2 seconds (a turn renews its lease once "
            "a second), not 1.5",
        ),
        ({"openai_api": True}, "--openai-api is served on the web port: set --web-port too"),
        ({"anthropic_api": True}, "--anthropic-api is served on the web port: set --web-port too"),
        ({"keep_tool_results": -1}, "--keep-tool-results must not be negative"),
        ({"clear_at_least_tokens": -5}, "--clear-at-least-tokens must not be negative"),
        (
            {"compaction_trigger_share": 1.5},
            "--compaction-trigger-share must be from 0 to 1, not 1.5",
        ),
        ({"compaction_keep_messages": 0}, "--compaction-keep-messages must be at least 1, not 0"),
    ],
)
def test_a_bad_setting_is_named_with_its_flag(values: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings(**values).check()  # type: ignore[arg-type]
    assert refused.value.errors == (message,)


def test_the_editing_and_compaction_limits_core_knows() -> None:
    """Checked by the composition root's rules: the cap's minimum, the tool names, the
    summary's timeout and instructions."""
    Settings(tool_result_cap_tokens=64, clear_exclude_tools="fetch, read_file").check(
        *SETTINGS_RULES
    )
    bad = Settings(
        tool_result_cap_tokens=10,
        clear_exclude_tools="fetch,bad name",
        compaction_timeout=0,
        compaction_prompt="x" * 4001,
    )
    with pytest.raises(SettingsError) as refused:
        bad.check(*SETTINGS_RULES)
    assert refused.value.errors == (
        "--compaction-timeout must be above 0 and at most 600 seconds, not 0",
        "--compaction-prompt must be at most 4000 characters",
        "--tool-result-cap-tokens must be 0 (no cap) or at least 64, not 10",
        "--clear-exclude-tools names 'bad name': a tool name is 1-64 letters, digits, '_' or '-'",
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("app:word", "app:word"),
        ("team:x=3", "team:x=3"),
        ("app:word=0", "app:word=0"),
        ("agent:=7", "agent:=7"),
        ("app:word=30,agent:planner=nan", "agent:planner=nan"),
    ],
)
def test_memory_expiry_days_is_checked_by_the_memory_layer(value: str, shown: str) -> None:
    Settings(memory_expiry_days="app:word=30, agent:planner=7.5").check(*SETTINGS_RULES)
    with pytest.raises(SettingsError) as refused:
        Settings(memory_expiry_days=value).check(*SETTINGS_RULES)
    assert refused.value.errors == (
        "--memory-expiry-days takes app:NAME=DAYS or agent:NAME=DAYS items, comma-separated, "
        f"with a positive number of days (not {shown!r})",
    )


def test_every_settings_error_is_reported_at_once() -> None:
    """Each error on a line of its own: the fields' in their order, then the rules
    between fields, then the rules given (what other modules know)."""

    def rule(settings: Settings) -> list[str]:
        return [f"--auth {settings.auth!r} is not a mode"]

    bad = Settings(port=-1, metrics_port=70000, openai_api=True, auth="password")
    with pytest.raises(SettingsError) as refused:
        bad.check(rule)
    expected = (
        "--port must be from 0 to 65535, not -1",
        "--metrics-port must be from 0 to 65535, not 70000",
        "--openai-api is served on the web port: set --web-port too",
        "--auth 'password' is not a mode",
    )
    assert refused.value.errors == expected
    assert str(refused.value) == "\n".join(expected)  # the exit message: one a line
    assert isinstance(refused.value, SystemExit) and refused.value.code == "\n".join(expected)


def test_serve_reports_every_settings_error_before_anything_starts(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    command = [sys.executable, "-m", "contextd", "serve", "--data-dir", str(data_dir)]
    flags = ["--port", "70000", "--auth", "password", "--cors-origins", "nope", "--web-port", "0"]
    done = subprocess.run(
        [*command, *flags, "--embedding-provider", "psychic", "--tls-cert", "cert.pem"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CONTEXTD_DATABASE_URL": "mysql://root:hunter2@db/contextd"},
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-6:] == [
        "--port must be from 0 to 65535, not 70000",
        "--auth 'password' is not a mode; choose one of none, api-key, jwt",
        "cors_origins: nope is not an origin (scheme://host[:port], e.g. https://localhost:3000)",
        "--database-url 'mysql://root:***@db/contextd': only postgresql:// URLs are supported "
        "(leave it empty for SQLite in the data directory)",
        "unknown embedding provider 'psychic'; expected one of none, openai, local",
        "--tls-cert needs --tls-key as well",
    ]
    assert "Traceback" not in done.stderr and "hunter2" not in done.stderr
    assert not data_dir.exists()  # nothing started: not even the data directory made

"""Settings: defaults, CONTEXTD_* variables, flags on top, clear errors for bad values."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from contextd.config import Settings, add_arguments


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

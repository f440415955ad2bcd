"""``contextd chat`` against a server started with ``--auth api-key``: the key from
``--api-key`` or ``CONTEXTD_API_KEY``, and never in the output or the server's logs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.keyed_server import UNKNOWN_KEY, KeyedServer, keyed_server
from tests.support.paths import ROOT

CHAT = [sys.executable, "-m", "contextd", "chat"]


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyedServer]:
    with keyed_server(tmp_path_factory.mktemp("chat-keys")) as server:
        yield server


def chat(*args: str, api_key: str | None = None) -> subprocess.CompletedProcess[str]:
    """``contextd chat ARGS`` with CONTEXTD_API_KEY set to ``api_key`` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "CONTEXTD_API_KEY"}
    if api_key is not None:
        env["CONTEXTD_API_KEY"] = api_key
    return subprocess.run(
        [*CHAT, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        cwd=ROOT,
        env=env,
    )


def _secret(key: str) -> str:
    """The part after ``ctxd_<id>_`` (the secret may hold ``_`` itself)."""
    return key.split("_", 2)[2]


def assert_key_hidden(key: str, done: subprocess.CompletedProcess[str], keyed: KeyedServer) -> None:
    for text in (done.stdout, done.stderr, str(keyed.proc.log_lines)):
        assert _secret(key) not in text


@pytest.mark.parametrize("via", ["--api-key", "CONTEXTD_API_KEY"])
def test_chat_with_a_key(keyed: KeyedServer, via: str) -> None:
    flags = ["--api-key", keyed.alice] if via == "--api-key" else []
    environment = keyed.alice if via == "CONTEXTD_API_KEY" else None
    done = chat("--address", keyed.address, *flags, "--once", "hello", api_key=environment)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("Your last message was: “hello”\n")
    assert done.stderr.startswith("session ")
    assert_key_hidden(keyed.alice, done, keyed)
    # The session is the key's user's, though $USER was not alice.
    session_id = done.stderr.split()[1]
    resumed = chat(
        "--address", keyed.address, "--session", session_id, "--once", "again", api_key=keyed.alice
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "(resumed, 2 messages)" in resumed.stderr


def test_the_flag_wins_over_the_environment(keyed: KeyedServer) -> None:
    done = chat(
        "--address", keyed.address, "--api-key", keyed.bob, "--user", "bob", "--once", "hi",
        api_key=UNKNOWN_KEY,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("key", [None, UNKNOWN_KEY])
def test_chat_without_a_valid_key_is_refused(keyed: KeyedServer, key: str | None) -> None:
    done = chat("--address", keyed.address, "--once", "hello", api_key=key)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"error: contextd at {keyed.address} refused the credentials: give a valid key"
        " with --api-key or CONTEXTD_API_KEY\n"
    )


def test_another_users_session_is_refused_without_naming_the_key(keyed: KeyedServer) -> None:
    first = chat("--address", keyed.address, "--once", "mine", api_key=keyed.alice)
    session_id = first.stderr.split()[1]
    done = chat(
        "--address", keyed.address, "--session", session_id, "--once", "x", api_key=keyed.bob
    )
    assert done.returncode == 2
    assert done.stderr == f"error: session {session_id} not found\n"
    assert_key_hidden(keyed.bob, done, keyed)


def test_another_user_than_the_keys_is_refused(keyed: KeyedServer) -> None:
    done = chat("--address", keyed.address, "--user", "bob", "--once", "x", api_key=keyed.alice)
    assert done.returncode == 2
    assert "PERMISSION_DENIED" in done.stderr
    assert_key_hidden(keyed.alice, done, keyed)


def test_a_malformed_key_is_a_usage_error_that_does_not_print_it() -> None:
    done = chat("--address", "127.0.0.1:1", "--api-key", "Bearer ctxd_abc_s3cr3t", "--once", "x")
    assert done.returncode == 2
    assert done.stderr.startswith("contextd chat: error: --api-key/CONTEXTD_API_KEY: ")
    assert "without 'Bearer '" in done.stderr
    assert "s3cr3t" not in done.stderr + done.stdout


def test_help_does_not_show_the_key_from_the_environment() -> None:
    done = chat("--help", api_key="ctxd_abc_s3cr3t")
    assert done.returncode == 0
    assert "--api-key KEY" in done.stdout
    assert "s3cr3t" not in done.stdout + done.stderr

"""`contextd keys`: a key is printed once, listed without its secret, stored only as a
hash, and a revocation stops it on a running server within a second."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd.v1 import sessions_pb2, sessions_pb2_grpc

from tests.support.auth import bearer, create_key, key_id, keys_command
from tests.support.server import ServerProcess, start_server


def _secret(token: str) -> str:
    return token.split("_", 2)[2]


def test_create_prints_the_key_once_and_list_never_shows_it(tmp_path: Path) -> None:
    done = keys_command(
        tmp_path, "create", "--user", "alice", "--name", "laptop", "--expires-days", "30"
    )
    assert done.returncode == 0, done.stderr
    [token] = done.stdout.split()
    assert token.startswith(f"ctxd_{key_id(token)}_")
    assert _secret(token) not in done.stderr
    assert key_id(token) in done.stderr

    listing = keys_command(tmp_path, "list")
    assert listing.returncode == 0, listing.stderr
    header, row = listing.stdout.splitlines()
    assert header.split()[:5] == ["id", "name", "user", "tenant", "service"]
    assert row.split()[:5] == [key_id(token), "laptop", "alice", "default", "no"]
    assert _secret(token) not in listing.stdout + listing.stderr
    # Only a hash is stored: the secret is in no file of the data directory.
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert _secret(token).encode() not in path.read_bytes(), path


def test_service_key_tenant_and_errors(tmp_path: Path) -> None:
    token = create_key(tmp_path, "backend", "--service", "--tenant", "acme")
    row = keys_command(tmp_path, "list").stdout.splitlines()[1].split()
    assert row[:5] == [key_id(token), "-", "backend", "acme", "yes"]
    missing = keys_command(tmp_path, "revoke", "000000000000")
    assert missing.returncode == 1
    assert "no key" in missing.stderr
    bad = keys_command(tmp_path, "create", "--user", "u", "--expires-days", "0")
    assert bad.returncode != 0


@pytest.fixture
def api_key_server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = start_server(tmp_path, "--auth", "api-key")
    yield proc
    assert proc.stop() == 0


def _list_sessions(address: str, token: str) -> grpc.StatusCode:
    with grpc.insecure_channel(address) as channel:
        stub = sessions_pb2_grpc.SessionServiceStub(channel)
        try:
            stub.ListSessions(sessions_pb2.ListSessionsRequest(), metadata=bearer(token))
        except grpc.RpcError as error:
            return error.code()
    return grpc.StatusCode.OK


def test_keys_work_on_a_running_server_and_revoke_stops_them(
    api_key_server: ServerProcess,
) -> None:
    data_dir = api_key_server.data_dir
    # Made while the server holds the data directory: no restart needed.
    token = create_key(data_dir, "alice")
    assert _list_sessions(api_key_server.address, token) == grpc.StatusCode.OK
    row = keys_command(data_dir, "list").stdout.splitlines()[1].split()
    assert row[6] != "-", "last used is noted on first use"

    assert keys_command(data_dir, "revoke", key_id(token)).returncode == 0
    revoked = time.monotonic()
    while _list_sessions(api_key_server.address, token) != grpc.StatusCode.UNAUTHENTICATED:
        assert time.monotonic() - revoked < 1.0, "revocation not honoured within a second"
        time.sleep(0.05)
    row = keys_command(data_dir, "list").stdout.splitlines()[1].split()
    assert row[8] != "-"

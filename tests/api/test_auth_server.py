"""How `--auth` shapes the server: what it refuses to start with, and which services
stay open (health always, reflection unless `--auth-protect-reflection`)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.support.auth import bearer, create_key
from tests.support.server import ServerProcess, start_server


def _serve_exits(data_dir: Path, *args: str) -> str:
    """Run ``contextd serve ARGS``, which must refuse to start; its stderr."""
    command = [sys.executable, "-m", "contextd", "serve", "--port", "0"]
    done = subprocess.run(
        [*command, "--data-dir", str(data_dir), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    return done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("--host", "0.0.0.0"),
        ("--host", "::"),
        ("--host", "contextd.example.com"),
        ("--host", ""),  # every interface
        ("--web-port", "0", "--web-host", "0.0.0.0"),
    ],
)
def test_auth_none_refuses_a_non_loopback_address(tmp_path: Path, args: tuple[str, ...]) -> None:
    stderr = _serve_exits(tmp_path, *args)
    assert "--auth none" in stderr
    assert "--allow-unauthenticated" in stderr


def test_an_unknown_auth_mode_is_refused(tmp_path: Path) -> None:
    assert "none, api-key, jwt" in _serve_exits(tmp_path, "--auth", "password")


@pytest.mark.parametrize(
    "args",
    [
        ("--host", "0.0.0.0", "--allow-unauthenticated"),
        ("--host", "0.0.0.0", "--allow-unauthenticated", "true"),
        ("--host", "0.0.0.0", "--auth", "api-key"),
        ("--host", "localhost"),
        ("--host", "127.0.0.2"),
    ],
)
def test_what_may_listen(tmp_path: Path, args: tuple[str, ...]) -> None:
    proc = start_server(tmp_path, *args)
    assert proc.stop() == 0


def _health(address: str) -> grpc.StatusCode:
    with grpc.insecure_channel(address) as channel:
        try:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        except grpc.RpcError as error:
            return error.code()
    return grpc.StatusCode.OK


def _reflection(address: str, metadata: tuple[tuple[str, str], ...] = ()) -> grpc.StatusCode:
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    with grpc.insecure_channel(address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        try:
            [reply] = list(stub.ServerReflectionInfo(iter([request]), 10, metadata))
        except grpc.RpcError as error:
            return error.code()
    names = {s.name for s in reply.list_services_response.service}
    assert "contextd.v1.SessionService" in names
    return grpc.StatusCode.OK


@pytest.fixture
def env_auth_server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = start_server(tmp_path, env={"CONTEXTD_AUTH": "api-key"})
    yield proc
    assert proc.stop() == 0


def test_health_and_reflection_stay_open_by_default(env_auth_server: ServerProcess) -> None:
    assert _health(env_auth_server.address) == grpc.StatusCode.OK
    assert _reflection(env_auth_server.address) == grpc.StatusCode.OK


def test_protected_reflection_needs_a_key(tmp_path: Path) -> None:
    token = create_key(tmp_path, "alice")
    proc = start_server(tmp_path, "--auth", "api-key", "--auth-protect-reflection")
    try:
        assert _health(proc.address) == grpc.StatusCode.OK
        assert _reflection(proc.address) == grpc.StatusCode.UNAUTHENTICATED
        assert _reflection(proc.address, tuple(bearer(token))) == grpc.StatusCode.OK
    finally:
        assert proc.stop() == 0

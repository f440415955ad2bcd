"""TLS and mutual TLS on the native port; flags that cannot work refuse to start; the
warning for a plain-text listener other machines can reach."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd.config import Settings
from contextd.root.server import start
from contextd.root.tls import ServerTls
from contextd.store.engine.data_lock import DataDirLock
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.server import ServerProcess, start_server
from tests.support.tls import Certificates, make_certificates, tls_flags, tls_server


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[ServerProcess]:
    with tls_server(tmp_path_factory.mktemp("tls"), certs, mutual=False) as proc:
        yield proc


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[ServerProcess]:
    with tls_server(tmp_path_factory.mktemp("mtls"), certs, mutual=True) as proc:
        yield proc


def health(address: str, credentials: grpc.ChannelCredentials | None) -> grpc.StatusCode:
    channel = (
        grpc.insecure_channel(address)
        if credentials is None
        else grpc.secure_channel(address, credentials)
    )
    with channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=5
            )
        except grpc.RpcError as error:
            return error.code()
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    return grpc.StatusCode.OK


def test_tls_with_the_right_ca(tls: ServerProcess, certs: Certificates) -> None:
    assert health(tls.address, certs.channel_credentials()) == grpc.StatusCode.OK
    assert tls.logs("listening")[0]["tls"] is True


def test_tls_with_another_ca_fails(tls: ServerProcess, certs: Certificates) -> None:
    credentials = certs.channel_credentials(ca=certs.other_ca)
    assert health(tls.address, credentials) == grpc.StatusCode.UNAVAILABLE


def test_plain_text_client_to_a_tls_port_fails(tls: ServerProcess) -> None:
    assert health(tls.address, None) == grpc.StatusCode.UNAVAILABLE


def test_mtls_without_a_client_certificate_is_refused(
    mtls: ServerProcess, certs: Certificates
) -> None:
    assert health(mtls.address, certs.channel_credentials()) == grpc.StatusCode.UNAVAILABLE


def test_mtls_with_a_client_certificate_of_the_right_ca(
    mtls: ServerProcess, certs: Certificates
) -> None:
    credentials = certs.channel_credentials(client=certs.client)
    assert health(mtls.address, credentials) == grpc.StatusCode.OK


def test_mtls_with_a_client_certificate_of_another_ca_is_refused(
    mtls: ServerProcess, certs: Certificates
) -> None:
    credentials = certs.channel_credentials(client=certs.other_client)
    assert health(mtls.address, credentials) == grpc.StatusCode.UNAVAILABLE


def contextd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "contextd", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_health_command_over_tls(mtls: ServerProcess, certs: Certificates) -> None:
    tls_ca = ["--tls-ca", str(certs.ca)]
    client = ["--tls-cert", str(certs.client.cert), "--tls-key", str(certs.client.key)]
    ok = contextd("health", "--address", mtls.address, *tls_ca, *client)
    assert ok.returncode == 0 and ok.stdout.strip() == f"{mtls.address}: SERVING"
    refused = contextd("health", "--address", mtls.address, *tls_ca)
    assert refused.returncode == 1 and "UNAVAILABLE" in refused.stderr
    half = contextd("health", "--address", mtls.address, "--tls-cert", str(certs.client.cert))
    assert half.returncode == 1 and half.stderr.strip() == "--tls-cert needs --tls-key as well"


def bad_tls_cases(certs: Certificates, tmp: Path) -> list[tuple[list[str], str]]:
    cert, key = str(certs.server.cert), str(certs.server.key)
    missing = str(tmp / "missing.pem")
    empty = tmp / "empty.pem"
    empty.write_text("")
    return [
        (["--tls-cert", cert], "--tls-cert needs --tls-key as well"),
        (["--tls-key", key], "--tls-key needs --tls-cert as well"),
        (["--tls-client-ca", str(certs.ca)], "--tls-client-ca needs --tls-cert and --tls-key"),
        (
            ["--tls-cert", missing, "--tls-key", key],
            f"--tls-cert {missing}: cannot read it (No such file or directory)",
        ),
        (["--tls-cert", cert, "--tls-key", str(empty)], f"--tls-key {empty}: the file is empty"),
        (
            ["--tls-cert", cert, "--tls-key", str(certs.client.key)],
            f"--tls-key {certs.client.key} is not the private key of --tls-cert {cert}",
        ),
        (
            ["--tls-cert", key, "--tls-key", cert],
            f"--tls-cert {key} and --tls-key {cert} must be a PEM certificate chain "
            "and its unencrypted private key",
        ),
        (
            [*tls_flags(certs, mutual=False), "--tls-client-ca", key],
            f"--tls-client-ca {key} holds no PEM certificate",
        ),
    ]


def test_bad_tls_flags_refuse_to_start(certs: Certificates, tmp_path: Path) -> None:
    for flags, message in bad_tls_cases(certs, tmp_path):
        done = contextd("serve", "--port", "0", "--data-dir", str(tmp_path / "data"), *flags)
        assert done.returncode == 1, flags
        # The message alone, as the last line: no traceback.
        assert done.stderr.strip().splitlines()[-1].startswith(message), done.stderr
        assert "Traceback" not in done.stderr


def test_the_tls_settings_come_from_the_environment(certs: Certificates) -> None:
    env = {"CONTEXTD_TLS_CERT": "c.pem", "CONTEXTD_TLS_KEY": "k.pem", "CONTEXTD_TLS_CLIENT_CA": "a"}
    settings = Settings.from_env(env)
    assert (settings.tls_cert, settings.tls_key, settings.tls_client_ca) == ("c.pem", "k.pem", "a")


def test_a_loopback_listener_logs_no_warning(tmp_path: Path) -> None:
    proc = start_server(tmp_path, "--host", "127.0.0.2")
    try:
        assert proc.logs("listening")
    finally:
        assert proc.stop() == 0
    assert [e for e in proc.log_lines if e.get("level") == "WARNING"] == []


def start_warnings(caplog: pytest.LogCaptureFixture, settings: Settings) -> list[str]:
    """The warnings the start-up path logs, without listening on a public interface: the
    start stops at the data directory, held here."""
    lock = DataDirLock.acquire(settings.data_dir)
    try:
        with pytest.raises(SystemExit, match="another contextd"):
            asyncio.run(start(settings))
    finally:
        lock.release()
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_the_warning_names_the_address(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    [warning] = start_warnings(
        caplog, Settings(host="0.0.0.0", port=0, data_dir=tmp_path, auth="api-key")
    )
    assert warning.startswith("listening on 0.0.0.0 without TLS")


def test_no_warning_with_tls(
    caplog: pytest.LogCaptureFixture, certs: Certificates, tmp_path: Path
) -> None:
    settings = Settings(
        host="0.0.0.0",
        port=0,
        data_dir=tmp_path,
        auth="api-key",
        tls_cert=str(certs.server.cert),
        tls_key=str(certs.server.key),
    )
    assert start_warnings(caplog, settings) == []


def test_the_private_key_stays_out_of_the_repr(certs: Certificates) -> None:
    tls = ServerTls.load(str(certs.server.cert), str(certs.server.key))
    assert tls is not None and tls.private_key == certs.server.key.read_bytes()
    assert "PRIVATE KEY" not in repr(tls)

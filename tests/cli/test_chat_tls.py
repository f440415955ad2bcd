"""``contextd chat`` against a server that requires TLS client certificates."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.server import ServerProcess
from tests.support.tls import Certificates, make_certificates, tls_server


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[ServerProcess]:
    with tls_server(tmp_path_factory.mktemp("chat-mtls"), certs, mutual=True) as proc:
        yield proc


def chat_once(address: str, *tls: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "contextd", "chat", "--address", address, *tls]
    return subprocess.run(
        [*command, "--user", "tls-user", "--once", "hello over TLS"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
    )


def test_chat_with_the_ca_and_a_client_certificate(
    mtls: ServerProcess, certs: Certificates
) -> None:
    client = ["--tls-cert", str(certs.client.cert), "--tls-key", str(certs.client.key)]
    done = chat_once(mtls.address, "--tls-ca", str(certs.ca), *client)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("Your last message was: “hello over TLS”\n")


def test_chat_without_a_client_certificate_cannot_connect(
    mtls: ServerProcess, certs: Certificates
) -> None:
    done = chat_once(mtls.address, "--tls-ca", str(certs.ca))
    assert done.returncode == 2
    assert f"cannot reach contextd at {mtls.address}" in done.stderr


def test_chat_with_half_a_client_pair_is_a_usage_error(certs: Certificates) -> None:
    done = chat_once("127.0.0.1:1", "--tls-key", str(certs.client.key))
    assert done.returncode == 2
    assert done.stderr == "contextd chat: error: --tls-key needs --tls-cert as well\n"

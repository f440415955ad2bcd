"""Certificates made for a test with trustme, and contextd servers that serve TLS."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import trustme

from tests.support.grpc_web import web_address
from tests.support.server import ServerProcess, start_server


@dataclass(frozen=True)
class Pair:
    """A certificate chain and its private key, as PEM files."""

    cert: Path
    key: Path

    def read(self) -> tuple[bytes, bytes]:
        return self.cert.read_bytes(), self.key.read_bytes()


@dataclass(frozen=True)
class Certificates:
    """A CA with a server certificate (localhost, 127.0.0.1) and a client certificate,
    and an unrelated CA with a client certificate of its own."""

    ca: Path
    server: Pair
    client: Pair
    other_ca: Path
    other_client: Pair

    def channel_credentials(
        self, ca: Path | None = None, client: Pair | None = None
    ) -> grpc.ChannelCredentials:
        cert, key = client.read() if client is not None else (None, None)
        return grpc.ssl_channel_credentials(
            root_certificates=(ca or self.ca).read_bytes(),
            private_key=key,
            certificate_chain=cert,
        )

    def ssl_context(self, ca: Path | None = None, client: Pair | None = None) -> ssl.SSLContext:
        """A client context for the web port."""
        context = ssl.create_default_context(cafile=str(ca or self.ca))
        if client is not None:
            context.load_cert_chain(client.cert, client.key)
        return context


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    ca, other = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    other.cert_pem.write_to_path(str(directory / "other-ca.pem"))
    return Certificates(
        ca=directory / "ca.pem",
        server=_write(directory, "server", ca.issue_cert("localhost", "127.0.0.1")),
        client=_write(directory, "client", ca.issue_cert("client@example.test")),
        other_ca=directory / "other-ca.pem",
        other_client=_write(directory, "other-client", other.issue_cert("client@example.test")),
    )


def _write(directory: Path, name: str, issued: trustme.LeafCert) -> Pair:
    pair = Pair(directory / f"{name}.pem", directory / f"{name}-key.pem")
    for i, blob in enumerate(issued.cert_chain_pems):
        blob.write_to_path(str(pair.cert), append=i > 0)
    issued.private_key_pem.write_to_path(str(pair.key))
    return pair


def tls_flags(certs: Certificates, *, mutual: bool) -> list[str]:
    flags = ["--tls-cert", str(certs.server.cert), "--tls-key", str(certs.server.key)]
    return [*flags, "--tls-client-ca", str(certs.ca)] if mutual else flags


@contextmanager
def tls_server(data_dir: Path, certs: Certificates, *, mutual: bool) -> Iterator[ServerProcess]:
    """A server with TLS (``mutual``: and client certificates) on both ports; it must
    stop cleanly, log no error, and only JSON lines (refused handshakes included)."""
    proc = start_server(data_dir, "--web-port", "0", *tls_flags(certs, mutual=mutual))
    try:
        yield proc
    finally:
        assert proc.stop() == 0
        assert not [e for e in proc.log_lines if e.get("level") == "ERROR"]
        assert [e for e in proc.log_lines if "level" not in e] == []  # not JSON


def web_url(proc: ServerProcess, path: str) -> str:
    return f"https://{web_address(proc)}{path}"

"""TLS for both listeners and for the ``contextd`` client commands.

Every problem with the files (a certificate without its key, an unreadable file, a key
that does not belong to the certificate) ends the command with a message naming the
file, before anything listens: a server that would fail at the first handshake, or fall
back to plain text, is worse than one that does not start.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

import grpc


@dataclass(frozen=True, slots=True)
class ServerTls:
    """The server's certificate chain and key (PEM), and the CA its clients' certificates
    must chain to when mutual TLS is on."""

    cert_chain: bytes
    private_key: bytes = field(repr=False)  # a secret: kept out of any log line
    client_ca: bytes | None
    ssl_context: ssl.SSLContext

    @staticmethod
    def missing_files(cert_file: str, key_file: str, client_ca_file: str = "") -> list[str]:
        """What the files named lack to make TLS: its key for a certificate, and so on."""
        missing = [] if (error := _pair_error(cert_file, key_file)) is None else [error]
        if client_ca_file and not cert_file and not key_file:
            missing.append("--tls-client-ca needs --tls-cert and --tls-key")
        return missing

    @classmethod
    def load(cls, cert_file: str, key_file: str, client_ca_file: str = "") -> ServerTls | None:
        """None without TLS (no files named); SystemExit on any problem with the files."""
        missing = cls.missing_files(cert_file, key_file, client_ca_file)
        if missing:
            raise SystemExit(missing[0])
        if not cert_file:
            return None
        cert_chain = _read("--tls-cert", cert_file)
        private_key = _read("--tls-key", key_file)
        client_ca = _read("--tls-client-ca", client_ca_file) if client_ca_file else None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(cert_file, key_file, password=_no_password)
        except (ssl.SSLError, ValueError) as error:
            if getattr(error, "reason", "") == "KEY_VALUES_MISMATCH":
                raise SystemExit(
                    f"--tls-key {key_file} is not the private key of --tls-cert {cert_file}"
                ) from None
            raise SystemExit(
                f"--tls-cert {cert_file} and --tls-key {key_file} must be a PEM certificate "
                f"chain and its unencrypted private key: {_reason(error)}"
            ) from None
        if client_ca is not None:
            try:
                context.load_verify_locations(cafile=client_ca_file)
            except ssl.SSLError as error:
                raise SystemExit(
                    f"--tls-client-ca {client_ca_file} holds no PEM certificate: {_reason(error)}"
                ) from None
            context.verify_mode = ssl.CERT_REQUIRED
        return cls(cert_chain, private_key, client_ca, context)

    def grpc_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.private_key, self.cert_chain)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )


def client_credentials(
    ca_file: str, cert_file: str = "", key_file: str = ""
) -> grpc.ChannelCredentials | None:
    """Channel credentials for ``--tls-ca`` (the system's roots if empty while a client
    pair is given) and the optional client pair for mutual TLS; None for plain text."""
    _require_pair(cert_file, key_file)
    if not (ca_file or cert_file):
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=_read("--tls-ca", ca_file) if ca_file else None,
        private_key=_read("--tls-key", key_file) if key_file else None,
        certificate_chain=_read("--tls-cert", cert_file) if cert_file else None,
    )


def _pair_error(cert_file: str, key_file: str) -> str | None:
    if cert_file and not key_file:
        return "--tls-cert needs --tls-key as well"
    if key_file and not cert_file:
        return "--tls-key needs --tls-cert as well"
    return None


def _require_pair(cert_file: str, key_file: str) -> None:
    error = _pair_error(cert_file, key_file)
    if error is not None:
        raise SystemExit(error)


def _read(flag: str, path: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise SystemExit(f"{flag} {path}: cannot read it ({error.strerror})") from None
    if not data.strip():
        raise SystemExit(f"{flag} {path}: the file is empty")
    return data


def _no_password() -> bytes:
    # Without this callback OpenSSL would prompt on the terminal for an encrypted key.
    raise ValueError("the key is encrypted; contextd needs an unencrypted key")


def _reason(error: Exception) -> str:
    if isinstance(error, ssl.SSLError):
        return str(error.reason or "unreadable PEM").replace("_", " ").lower()
    return str(error)

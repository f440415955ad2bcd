"""The Python SDK over TLS and mutual TLS: ``credentials=`` on both clients."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from contextd_client import AsyncContextClient, ContextClient, ContextdError

from tests.support.server import ServerProcess
from tests.support.tls import Certificates, make_certificates, tls_server


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[ServerProcess]:
    with tls_server(tmp_path_factory.mktemp("sdk-mtls"), certs, mutual=True) as proc:
        yield proc


def test_sync_client_with_a_client_certificate(mtls: ServerProcess, certs: Certificates) -> None:
    credentials = certs.channel_credentials(client=certs.client)
    with ContextClient(mtls.address, timeout=10, credentials=credentials) as client:
        assert client.count_tokens("hello", tokenizer="estimate").total_tokens == 2
        session = client.create_session("tls-user")
        assert client.stream_chat("Hi!", user_id="tls-user", session_id=session["id"]).result().ok


@pytest.mark.parametrize("refused", ["no client certificate", "another CA", "plain text"])
def test_sync_client_refused(mtls: ServerProcess, certs: Certificates, refused: str) -> None:
    credentials = {
        "no client certificate": certs.channel_credentials(),
        "another CA": certs.channel_credentials(ca=certs.other_ca, client=certs.client),
        "plain text": None,
    }[refused]
    with (
        ContextClient(mtls.address, timeout=10, credentials=credentials) as client,
        pytest.raises(ContextdError) as caught,
    ):
        client.list_tokenizers()
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE


async def test_async_client_with_a_client_certificate(
    mtls: ServerProcess, certs: Certificates
) -> None:
    credentials = certs.channel_credentials(client=certs.client)
    async with AsyncContextClient(mtls.address, timeout=10, credentials=credentials) as client:
        assert (await client.count_tokens("hello", tokenizer="estimate")).total_tokens == 2


async def test_async_client_without_a_client_certificate_is_refused(
    mtls: ServerProcess, certs: Certificates
) -> None:
    credentials = certs.channel_credentials()
    async with AsyncContextClient(mtls.address, timeout=10, credentials=credentials) as client:
        with pytest.raises(ContextdError) as caught:
            await client.list_tokenizers()
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE

"""The web port over HTTPS, and with client certificates (mutual TLS)."""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator

import aiohttp
import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb

from tests.support.grpc_web import frame, parse_body, request_headers
from tests.support.server import ServerProcess
from tests.support.tls import Certificates, Pair, make_certificates, tls_server, web_url
from tests.support.web_port import CHAT, CTX, new_user


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[ServerProcess]:
    with tls_server(tmp_path_factory.mktemp("web-tls"), certs, mutual=False) as proc:
        yield proc


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[ServerProcess]:
    with tls_server(tmp_path_factory.mktemp("web-mtls"), certs, mutual=True) as proc:
        yield proc


async def list_tokenizers(url: str, ssl_context: ssl.SSLContext | bool) -> list[str]:
    """ListTokenizers over Connect with JSON; the names of the tokenizers."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            url,
            data=b"{}",
            headers={"Content-Type": "application/json", "Connect-Protocol-Version": "1"},
            ssl=ssl_context,
        ) as response,
    ):
        assert response.status == 200
        return [t["name"] for t in json.loads(await response.read())["tokenizers"]]


def tokenizers_url(proc: ServerProcess) -> str:
    return web_url(proc, f"/{CTX}/ListTokenizers")


async def test_https_with_the_right_ca(tls: ServerProcess, certs: Certificates) -> None:
    assert "estimate" in await list_tokenizers(tokenizers_url(tls), certs.ssl_context())
    [line] = tls.logs("grpc-web listening")
    assert line["tls"] is True


async def test_https_with_another_ca_fails(tls: ServerProcess, certs: Certificates) -> None:
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await list_tokenizers(tokenizers_url(tls), certs.ssl_context(ca=certs.other_ca))


async def test_plain_http_to_the_tls_port_fails(tls: ServerProcess) -> None:
    plain = tokenizers_url(tls).replace("https://", "http://")
    with pytest.raises(aiohttp.ClientError):
        await list_tokenizers(plain, False)


async def test_a_chat_turn_streams_over_https(tls: ServerProcess, certs: Certificates) -> None:
    """gRPC-Web server streaming: the call goes through to the native server and back."""
    request = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=new_user()), user_message="hello over https"
    )
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            web_url(tls, f"/{CHAT}"),
            data=frame(request.SerializeToString()),
            headers=request_headers(),
            ssl=certs.ssl_context(),
        ) as response,
    ):
        assert response.status == 200
        messages, trailers = parse_body(await response.read(), text=False)
    assert trailers["grpc-status"] == str(grpc.StatusCode.OK.value[0])
    events = [cpb.StreamChatResponse.FromString(m).WhichOneof("event") for m in messages]
    assert events[0] == "turn_started" and events[-1] == "turn_completed"


async def test_mtls_with_a_client_certificate_of_the_right_ca(
    mtls: ServerProcess, certs: Certificates
) -> None:
    context = certs.ssl_context(client=certs.client)
    assert "estimate" in await list_tokenizers(tokenizers_url(mtls), context)


@pytest.mark.parametrize("client", [None, "other_client"])
async def test_mtls_refuses_no_or_a_foreign_client_certificate(
    mtls: ServerProcess, certs: Certificates, client: str | None
) -> None:
    pair: Pair | None = getattr(certs, client) if client else None
    with pytest.raises(aiohttp.ClientError):
        await list_tokenizers(tokenizers_url(mtls), certs.ssl_context(client=pair))

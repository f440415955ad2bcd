"""The host protocols under mutual TLS: the MCP port and /v1 on the web port serve HTTPS
with the server's certificate, want a client certificate, and reach the native port
over its private socket."""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import httpx
import httpx2
import openai
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.mcp_server.conftest import call
from tests.support.grpc_web import web_address
from tests.support.server import ServerProcess, start_server
from tests.support.tls import Certificates, make_certificates, tls_flags


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, certs: Certificates
) -> Iterator[ServerProcess]:
    proc = start_server(
        tmp_path_factory.mktemp("tls"),
        *("--web-port", "0", "--openai-api", "--mcp-port", "0"),
        *tls_flags(certs, mutual=True),
    )
    yield proc
    assert proc.stop() == 0
    assert not [e for e in proc.log_lines if e.get("level") == "ERROR"]


def mcp_https(proc: ServerProcess) -> str:
    [line] = proc.logs("mcp listening")
    assert line["tls"] is True
    return f"https://{line['address']}{line['path']}"


async def test_mcp_over_https_with_a_client_certificate(
    server: ServerProcess, certs: Certificates
) -> None:
    context = certs.ssl_context(client=certs.client)
    http = httpx2.AsyncClient(verify=context, headers={"X-Contextd-User": "tess"}, timeout=30)
    async with http, Client(streamable_http_client(mcp_https(server), http_client=http)) as c:
        added = await call(c, "add_memory", content="Tess uses TLS.")
        found = await call(c, "search_memories", query="TLS")
    assert [m["id"] for m in found["memories"]] == [added["memory"]["id"]]


def test_mcp_refuses_a_client_without_a_certificate(
    server: ServerProcess, certs: Certificates
) -> None:
    # Under TLS 1.3 the refusal comes after the handshake: the connection is closed.
    with pytest.raises((httpx.TransportError, ssl.SSLError)):
        httpx.post(mcp_https(server), json={}, verify=certs.ssl_context(), timeout=10)


def test_openai_over_https_with_a_client_certificate(
    server: ServerProcess, certs: Certificates
) -> None:
    http = httpx.Client(verify=certs.ssl_context(client=certs.client), timeout=30)
    with openai.OpenAI(
        base_url=f"https://{web_address(server)}/v1", api_key="unused", http_client=http
    ) as client:
        answer = client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "over TLS"}], user="tess"
        )
    assert (answer.choices[0].message.content or "").endswith("“over TLS”")

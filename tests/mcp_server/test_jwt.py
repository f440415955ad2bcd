"""Both host protocols under --auth jwt: an identity provider's token works on /v1 and
on the MCP port as on the native port (the token's user, in its tenant), and a token the
server refuses is 401 on both."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.mcp_server.conftest import call, connect, mcp_url, memories
from tests.support.grpc_web import web_address
from tests.support.jwks import AUDIENCE, ISSUER, SigningKey, claims, jwks, rsa_key
from tests.support.server import ServerProcess, start_server


@pytest.fixture(scope="module")
def signer() -> SigningKey:
    return rsa_key("k-1")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, signer: SigningKey) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("jwt")
    keys = directory / "jwks.json"
    keys.write_text(json.dumps(jwks(signer)))
    proc = start_server(
        directory / "data",
        *("--auth", "jwt", "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE),
        *("--jwt-jwks", str(keys), "--web-port", "0", "--openai-api", "--mcp-port", "0"),
    )
    yield proc
    assert proc.stop() == 0


def test_a_token_works_on_v1_and_a_refused_one_is_401(
    server: ServerProcess, signer: SigningKey
) -> None:
    base_url = f"http://{web_address(server)}/v1"
    token = signer.sign(claims(sub="uma"))
    with openai.OpenAI(base_url=base_url, api_key=token, max_retries=0) as client:
        answer = client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "with a token"}]
        )
    assert answer.model_extra is not None and answer.model_extra["contextd"]["status"] == "ok"
    expired = signer.sign(claims(sub="uma", exp=int(time.time()) - 60))
    with (
        openai.OpenAI(base_url=base_url, api_key=expired, max_retries=0) as client,
        pytest.raises(openai.AuthenticationError),
    ):
        client.models.list()


async def test_a_token_works_on_the_mcp_port_and_a_refused_one_is_401(
    server: ServerProcess, signer: SigningKey
) -> None:
    token = signer.sign(claims(sub="vic"))
    async with connect(mcp_url(server), Authorization=f"Bearer {token}") as client:
        await call(client, "add_memory", content="Vic signs in with Entra.")
    assert memories(server.address, key=token) == ["Vic signs in with Entra."]
    other_tenant = signer.sign(claims(sub="vic", tid="t-2"))
    assert memories(server.address, key=other_tenant) == []
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    async with httpx.AsyncClient(timeout=30) as http:
        refused = await http.post(
            mcp_url(server),
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Authorization": f"Bearer {forged}"},
        )
    assert refused.status_code == 401


def test_the_resource_metadata_names_the_issuer(server: ServerProcess) -> None:
    url = mcp_url(server)
    document = httpx.get(url.removesuffix("/mcp") + "/.well-known/oauth-protected-resource/mcp")
    assert document.status_code == 200
    assert document.json()["resource"] == url
    assert document.json()["authorization_servers"] == [ISSUER]
    assert document.json()["contextd_credential"] == "jwt"

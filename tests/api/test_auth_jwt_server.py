"""`contextd serve --auth jwt` end to end: tokens of a provider whose JWKS is a file,
checked by the running server; the token's user is the caller."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd.v1 import sessions_pb2 as spb
from contextd.v1 import sessions_pb2_grpc as spb_grpc

from tests.support.jwks import AUDIENCE, ISSUER, SigningKey, claims, jwks, rsa_key
from tests.support.server import ServerProcess, start_server

JWT_ARGS = ("--auth", "jwt", "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE)


@pytest.fixture(scope="module")
def signer() -> SigningKey:
    return rsa_key("k-1")


@pytest.fixture
def server(tmp_path: Path, signer: SigningKey) -> Iterator[ServerProcess]:
    keys = tmp_path / "jwks.json"
    keys.write_text(json.dumps(jwks(signer)))
    proc = start_server(tmp_path / "data", *JWT_ARGS, "--jwt-jwks", str(keys))
    yield proc
    assert proc.stop() == 0


def _sessions(server: ServerProcess, token: str, user_id: str = "") -> list[str]:
    with grpc.insecure_channel(server.address) as channel:
        stub = spb_grpc.SessionServiceStub(channel)
        metadata = [("authorization", f"Bearer {token}")]
        reply = stub.ListSessions(spb.ListSessionsRequest(user_id=user_id), metadata=metadata)
    return [s.id for s in reply.sessions]


def _create(server: ServerProcess, token: str) -> str:
    with grpc.insecure_channel(server.address) as channel:
        stub = spb_grpc.SessionServiceStub(channel)
        metadata = [("authorization", f"Bearer {token}")]
        reply = stub.CreateSession(spb.CreateSessionRequest(title="t"), metadata=metadata)
    return str(reply.session.id)


def _code(call: object) -> grpc.StatusCode:
    try:
        assert callable(call)
        call()
    except grpc.RpcError as error:
        return error.code()
    return grpc.StatusCode.OK


def test_the_token_user_is_the_caller(server: ServerProcess, signer: SigningKey) -> None:
    alice = signer.sign(claims(sub="alice"))
    bob = signer.sign(claims(sub="bob"))
    session_id = _create(server, alice)
    assert _sessions(server, alice) == [session_id]
    assert _sessions(server, alice, "alice") == [session_id]
    assert _sessions(server, bob) == []
    assert _code(lambda: _sessions(server, bob, "alice")) == grpc.StatusCode.PERMISSION_DENIED
    line = server.logs("rpc")[-1]
    assert line["credential"] == "jwt:bob"
    assert line["user"] == "bob"


def test_bad_tokens_are_unauthenticated(server: ServerProcess, signer: SigningKey) -> None:
    other = rsa_key("k-1")  # the same kid, a key the provider never published
    for token in (
        "",
        "not-a-jwt",
        signer.sign(claims(exp=int(time.time()) - 3600)),
        signer.sign(claims(aud="api://another-app")),
        other.sign(claims()),
    ):
        assert _code(lambda t=token: _sessions(server, t)) == grpc.StatusCode.UNAUTHENTICATED


@pytest.mark.parametrize("missing", ["--jwt-jwks", "--jwt-issuer", "--jwt-audience"])
def test_jwt_mode_needs_its_settings(tmp_path: Path, missing: str) -> None:
    values = {"--jwt-jwks": str(tmp_path / "jwks.json"), "--jwt-issuer": ISSUER}
    values["--jwt-audience"] = AUDIENCE
    args = ["--auth", "jwt"]
    for flag, value in values.items():
        if flag != missing:
            args += [flag, value]
    command = [sys.executable, "-m", "contextd", "serve", "--port", "0", "--data-dir"]
    done = subprocess.run(
        [*command, str(tmp_path), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert f"--auth jwt needs {missing}" in done.stderr

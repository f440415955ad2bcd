"""The Python SDK's credentials against a server started with ``--auth api-key``:
``api_key=`` and ``token=`` (asked again on every call) on both clients, also over TLS."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd_client import AsyncContextClient, ContextClient, ContextdError, PermissionDeniedError

from tests.support.jwks import AUDIENCE, ISSUER, claims, jwks, rsa_key
from tests.support.keyed_server import UNKNOWN_KEY, KeyedServer, keyed_server
from tests.support.server import start_server
from tests.support.tls import Certificates, make_certificates, tls_flags


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyedServer]:
    with keyed_server(tmp_path_factory.mktemp("sdk-keys")) as server:
        yield server


class Rotating:
    """A token provider handing out the next token on every call, counting the calls."""

    def __init__(self, *tokens: str) -> None:
        self.tokens = list(tokens)
        self.calls = 0

    def __call__(self) -> str:
        token = self.tokens[min(self.calls, len(self.tokens) - 1)]
        self.calls += 1
        return token

    async def fetch(self) -> str:
        return self()


def _unauthenticated(error: pytest.ExceptionInfo[ContextdError]) -> None:
    assert error.value.code == grpc.StatusCode.UNAUTHENTICATED
    assert isinstance(error.value.__cause__, grpc.RpcError)


# Sync client --------------------------------------------------------------------------


def test_sync_api_key_on_every_kind_of_call(keyed: KeyedServer) -> None:
    with ContextClient(keyed.address, timeout=10, api_key=keyed.alice) as client:
        session = client.create_session("")  # empty: the caller
        assert session["user_id"] == "alice"
        turn = client.stream_chat("Hi!", user_id="", session_id=session["id"]).result()
        assert turn.ok
        assert [e["type"] for e in client.export_events("", session["id"])]
        assert [s["id"] for s in client.list_sessions("alice")] == [session["id"]]
        with pytest.raises(PermissionDeniedError) as caught:
            client.list_sessions("bob")
        assert caught.value.code == grpc.StatusCode.PERMISSION_DENIED


@pytest.mark.parametrize("api_key", [None, UNKNOWN_KEY, "garbage"])
def test_sync_missing_or_wrong_key_is_unauthenticated(
    keyed: KeyedServer, api_key: str | None
) -> None:
    with ContextClient(keyed.address, timeout=10, api_key=api_key) as client:
        with pytest.raises(ContextdError) as caught:
            client.list_sessions("")
        _unauthenticated(caught)
        with pytest.raises(ContextdError) as caught:
            client.stream_chat("Hi!", user_id="").result()
        _unauthenticated(caught)


def test_sync_token_provider_is_asked_on_every_call(keyed: KeyedServer) -> None:
    provider = Rotating(keyed.alice, keyed.bob)
    with ContextClient(keyed.address, timeout=10, token=provider) as client:
        assert provider.calls == 0
        assert client.create_session("")["user_id"] == "alice"
        assert provider.calls == 1
        # The refreshed token is used by the very next call.
        assert client.create_session("")["user_id"] == "bob"
        assert client.stream_chat("Hi!", user_id="bob").result().ok
        assert provider.calls == 3


def test_sync_token_provider_with_a_wrong_token(keyed: KeyedServer) -> None:
    with ContextClient(keyed.address, timeout=10, token=lambda: UNKNOWN_KEY) as client:
        with pytest.raises(ContextdError) as caught:
            client.count_tokens("hello", tokenizer="estimate")
        _unauthenticated(caught)


def test_a_token_provider_error_reaches_the_caller(keyed: KeyedServer) -> None:
    def broken() -> str:
        raise LookupError("the sign-in expired")

    with (
        ContextClient(keyed.address, timeout=10, token=broken) as client,
        pytest.raises(LookupError, match="sign-in expired"),
    ):
        client.list_sessions("")


@pytest.mark.parametrize("token", ["", "Bearer abc", "abc\n", 42, None])
def test_a_bad_token_from_the_provider_is_refused_before_sending(
    keyed: KeyedServer, token: object
) -> None:
    provider: object = lambda: token  # noqa: E731
    with (
        ContextClient(keyed.address, timeout=10, token=provider) as client,  # type: ignore[arg-type]
        pytest.raises(ValueError, match="token provider"),
    ):
        client.list_sessions("")


# Async client -------------------------------------------------------------------------


async def test_async_api_key(keyed: KeyedServer) -> None:
    async with AsyncContextClient(keyed.address, timeout=10, api_key=keyed.bob) as client:
        session = await client.create_session("")
        assert session["user_id"] == "bob"
        assert (await client.stream_chat("Hi!", user_id="", session_id=session["id"]).result()).ok
        assert [e async for e in client.export_events("", session["id"])]


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_async_token_provider_is_asked_on_every_call(keyed: KeyedServer, kind: str) -> None:
    provider = Rotating(keyed.alice, keyed.bob)
    token = provider if kind == "sync" else provider.fetch
    async with AsyncContextClient(keyed.address, timeout=10, token=token) as client:
        assert (await client.create_session(""))["user_id"] == "alice"
        stream = client.stream_chat("Hi!", user_id="")
        await anext(stream)  # the provider's second token: bob
        assert (await stream.result()).ok
        assert stream.started is not None
        session = await client.get_session("", stream.started.session_id)
        assert session["user_id"] == "bob"
        assert [e async for e in client.export_events("", session["id"])]
        assert provider.calls == 4


async def test_async_stream_with_an_async_provider_cancelled_before_it_starts(
    keyed: KeyedServer,
) -> None:
    provider = Rotating(keyed.alice)
    async with AsyncContextClient(keyed.address, timeout=10, token=provider.fetch) as client:
        stream = client.stream_chat("Hi!", user_id="")
        with pytest.raises(RuntimeError, match="first event"):
            _ = stream.call
        assert stream.cancel() is False
        assert [e async for e in stream] == []
    assert provider.calls == 0  # never asked: the turn never started


async def test_async_stream_cancelled_by_another_task_while_the_token_is_awaited(
    keyed: KeyedServer,
) -> None:
    asked = asyncio.Event()

    async def slow_sign_in() -> str:
        asked.set()
        await asyncio.sleep(0.3)
        return keyed.alice

    async with AsyncContextClient(keyed.address, timeout=10, token=slow_sign_in) as client:
        stream = client.stream_chat("Hi!", user_id="")
        reader = asyncio.create_task(anext(stream, None))
        await asked.wait()
        stream.cancel()
        assert await reader is None  # the stream just ends
        assert stream.cancelled and stream.call.cancelled()
        assert await client.list_sessions("") is not None  # the client still works


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_async_wrong_token_is_unauthenticated(keyed: KeyedServer, kind: str) -> None:
    provider = Rotating(UNKNOWN_KEY)
    token = provider if kind == "sync" else provider.fetch
    async with AsyncContextClient(keyed.address, timeout=10, token=token) as client:
        with pytest.raises(ContextdError) as caught:
            await client.list_sessions("")
        _unauthenticated(caught)
        with pytest.raises(ContextdError) as caught:
            await client.stream_chat("Hi!", user_id="").result()
        _unauthenticated(caught)
    async with AsyncContextClient(keyed.address, timeout=10, api_key=UNKNOWN_KEY) as client:
        with pytest.raises(ContextdError) as caught:
            await client.list_sessions("")
        _unauthenticated(caught)


# Arguments ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"api_key": "k", "token": lambda: "k"}, "either api_key or token"),
        ({"token": "a-token-not-a-callable"}, "callable"),
        ({"api_key": ""}, "api_key must be a non-empty token"),
        ({"api_key": "Bearer ctxd_x"}, "without 'Bearer '"),
        ({"api_key": "ctxd_x\n"}, "api_key"),
        ({"api_key": b"ctxd_x"}, "api_key must be a str"),
        ({"api_key": "k", "metadata": {"Authorization": "Bearer k"}}, "authorization"),
    ],
)
def test_invalid_credential_arguments(arguments: dict[str, object], message: str) -> None:
    for client_class in (ContextClient, AsyncContextClient):
        with pytest.raises(ValueError, match=message):
            client_class("127.0.0.1:1", **arguments)  # type: ignore[arg-type]


def test_the_sync_client_refuses_an_async_token_provider(keyed: KeyedServer) -> None:
    async def fetch() -> str:
        return keyed.alice

    with pytest.raises(ValueError, match="AsyncContextClient takes an async one"):
        ContextClient(keyed.address, token=fetch)  # type: ignore[arg-type]
    # A callable hiding its awaitable is caught at the call, before anything is sent.
    with (
        ContextClient(keyed.address, timeout=10, token=lambda: fetch()) as client,  # type: ignore[arg-type,return-value]
        pytest.raises(ValueError, match="not an awaitable"),
    ):
        client.list_sessions("")


def test_the_key_is_not_in_the_repr() -> None:
    with ContextClient("127.0.0.1:1", api_key="ctxd_secret") as client:
        assert "secret" not in repr(client)
        assert client.metadata is None


# Over TLS -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_keyed(
    tmp_path_factory: pytest.TempPathFactory, certs: Certificates
) -> Iterator[KeyedServer]:
    flags = tls_flags(certs, mutual=False)
    with keyed_server(tmp_path_factory.mktemp("sdk-tls-keys"), *flags) as server:
        yield server


async def test_tls_root_certificates_with_a_key(
    tls_keyed: KeyedServer, certs: Certificates
) -> None:
    credentials = certs.channel_credentials()
    address = tls_keyed.address
    with ContextClient(address, timeout=10, credentials=credentials, api_key=tls_keyed.alice) as c:
        assert c.create_session("")["user_id"] == "alice"
    with ContextClient(address, timeout=10, credentials=credentials) as c:
        with pytest.raises(ContextdError) as caught:
            c.list_sessions("")
        _unauthenticated(caught)
    provider = Rotating(tls_keyed.bob)
    async with AsyncContextClient(
        address, timeout=10, credentials=credentials, token=provider.fetch
    ) as client:
        assert (await client.create_session(""))["user_id"] == "bob"
        assert (await client.stream_chat("Hi!", user_id="").result()).ok


# JWT ----------------------------------------------------------------------------------


def test_a_token_provider_refreshing_jwts(tmp_path: Path) -> None:
    signer = rsa_key("k-1")
    keys = tmp_path / "jwks.json"
    keys.write_text(json.dumps(jwks(signer)))
    jwt_args = ("--auth", "jwt", "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE)
    proc = start_server(tmp_path / "data", *jwt_args, "--jwt-jwks", str(keys))
    users = iter(["ada", "grace"])

    def sign_in() -> str:  # as an SSO library would: a fresh token when the old one ends
        return signer.sign(claims(sub=next(users)))

    try:
        with ContextClient(proc.address, timeout=10, token=sign_in) as client:
            assert client.create_session("")["user_id"] == "ada"
            assert client.create_session("")["user_id"] == "grace"
        expired = signer.sign(claims(sub="ada", exp=1, iat=0, nbf=0))
        with ContextClient(proc.address, timeout=10, token=lambda: expired) as client:
            with pytest.raises(ContextdError) as caught:
                client.list_sessions("")
            _unauthenticated(caught)
    finally:
        assert proc.stop() == 0

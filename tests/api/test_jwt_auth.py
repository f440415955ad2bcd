"""JwtAuthenticator against keys made here and a JWKS served by a real local HTTP server.

Every refusal is the one generic Unauthenticated. The JWKS server runs in the test's
own event loop, so a read that blocked the loop could never be answered: every test
that reads the URL also shows the read does not block.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from contextd.config import Settings
from contextd.core.errors import Unauthenticated
from contextd.core.identity import Identity
from contextd.fronts.grpc.jwks import MAX_JWKS_BYTES, JwksCache, JwksUrl
from contextd.fronts.grpc.jwt_auth import JwtAuthenticator
from cryptography.hazmat.primitives.asymmetric import ec

from tests.support.jwks import (
    AUDIENCE,
    ISSUER,
    JwksServer,
    SigningKey,
    claims,
    ec_key,
    forged_hs256,
    jwks,
    rsa_key,
    unsigned,
)

GENERIC = "a valid credential is required"


class Clock:
    """The cache's monotonic clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="module")
def rsa1() -> SigningKey:
    return rsa_key("rsa-1")


@pytest.fixture(scope="module")
def rsa2() -> SigningKey:
    return rsa_key("rsa-2")


@pytest.fixture(scope="module")
def ec1() -> SigningKey:
    return ec_key("ec-1")


@pytest.fixture
async def idp(rsa1: SigningKey, ec1: SigningKey) -> AsyncIterator[JwksServer]:
    server = await JwksServer(jwks(rsa1, ec1)).start()
    yield server
    await server.stop()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def settings(jwks_location: str, **overrides: str) -> Settings:
    values = {"jwt_jwks": jwks_location, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE}
    return Settings(**{**values, **overrides})  # type: ignore[arg-type]


@pytest.fixture
def auth(idp: JwksServer, clock: Clock) -> JwtAuthenticator:
    return JwtAuthenticator.from_settings(settings(idp.url), clock=clock)


async def rejected(auth: JwtAuthenticator, token: str) -> None:
    with pytest.raises(Unauthenticated) as caught:
        await auth.authenticate(token)
    assert str(caught.value) == GENERIC


# Accepted ----------------------------------------------------------------------------


async def test_an_rs256_token_names_its_user_and_tenant(
    auth: JwtAuthenticator, rsa1: SigningKey
) -> None:
    identity = await auth.authenticate(rsa1.sign(claims()))
    assert identity == Identity("subject-1", "t-1", service=False, credential_id="jwt:subject-1")


async def test_an_es256_token_is_accepted(auth: JwtAuthenticator, ec1: SigningKey) -> None:
    identity = await auth.authenticate(ec1.sign(claims(sub="subject-2", tid="t-2")))
    assert (identity.user_id, identity.tenant_id) == ("subject-2", "t-2")


async def test_entra_id_tokens_map_oid_to_the_user_and_tid_to_the_tenant(
    idp: JwksServer, clock: Clock, rsa1: SigningKey
) -> None:
    entra = settings(idp.url, jwt_user_claim="oid", jwt_tenant_claim="tid")
    auth = JwtAuthenticator.from_settings(entra, clock=clock)
    token = rsa1.sign(claims(sub="pairwise-sub", oid="object-id-9", tid="tenant-guid"))
    identity = await auth.authenticate(token)
    # The subject names the credential in logs; the user is the stable object id.
    assert identity == Identity("object-id-9", "tenant-guid", credential_id="jwt:pairwise-sub")
    await rejected(auth, rsa1.sign(claims(oid=None)))


async def test_several_issuers_and_audiences_may_be_accepted(
    idp: JwksServer, clock: Clock, rsa1: SigningKey
) -> None:
    other_issuer = "https://login.example.test/tenant-b/v2.0"
    several = settings(
        idp.url, jwt_issuer=f"{ISSUER}, {other_issuer}", jwt_audience=f"{AUDIENCE},client-id"
    )
    auth = JwtAuthenticator.from_settings(several, clock=clock)
    await auth.authenticate(rsa1.sign(claims(iss=other_issuer, aud="client-id")))
    await rejected(auth, rsa1.sign(claims(iss="https://elsewhere.test/v2.0")))


async def test_without_a_tenant_claim_every_user_is_in_the_default_tenant(
    idp: JwksServer, clock: Clock, rsa1: SigningKey
) -> None:
    auth = JwtAuthenticator.from_settings(settings(idp.url, jwt_tenant_claim=""), clock=clock)
    identity = await auth.authenticate(rsa1.sign(claims(tid="ignored")))
    assert identity.tenant_id == "default"


async def test_a_configured_tenant_claim_must_be_present(
    auth: JwtAuthenticator, rsa1: SigningKey
) -> None:
    await rejected(auth, rsa1.sign(claims(tid=None)))
    await rejected(auth, rsa1.sign(claims(tid="")))


async def test_a_minute_of_clock_skew_is_allowed(auth: JwtAuthenticator, rsa1: SigningKey) -> None:
    now = int(time.time())
    await auth.authenticate(rsa1.sign(claims(exp=now - 30)))
    await auth.authenticate(rsa1.sign(claims(nbf=now + 30, iat=now + 30)))


# Refused -----------------------------------------------------------------------------


TIMES = ("exp", "nbf", "iat")  # in bad_claims, seconds from the moment the test runs


def bad_claims() -> list[Any]:
    return [
        pytest.param({"iss": "https://evil.test/v2.0"}, id="wrong issuer"),
        pytest.param({"aud": "api://another-app"}, id="wrong audience"),
        pytest.param({"exp": -120}, id="expired"),
        pytest.param({"nbf": 120}, id="not yet valid"),
        pytest.param({"iat": 120}, id="issued in the future"),
        pytest.param({"exp": None}, id="no exp"),
        pytest.param({"iss": None}, id="no issuer"),
        pytest.param({"aud": None}, id="no audience"),
        pytest.param({"sub": None}, id="no subject"),
        pytest.param({"sub": ""}, id="empty subject"),
        pytest.param({"sub": 42}, id="subject not a string"),
    ]


@pytest.mark.parametrize("overrides", bad_claims())
async def test_a_token_with_bad_claims_is_refused(
    auth: JwtAuthenticator, rsa1: SigningKey, overrides: dict[str, Any]
) -> None:
    now = int(time.time())
    timed = {k: now + v for k, v in overrides.items() if k in TIMES and isinstance(v, int)}
    await rejected(auth, rsa1.sign(claims(**{**overrides, **timed})))


async def test_a_missing_user_claim_is_refused(
    idp: JwksServer, clock: Clock, rsa1: SigningKey
) -> None:
    auth = JwtAuthenticator.from_settings(settings(idp.url, jwt_user_claim="upn"), clock=clock)
    await rejected(auth, rsa1.sign(claims()))
    await rejected(auth, rsa1.sign(claims(upn=["a", "b"])))
    identity = await auth.authenticate(rsa1.sign(claims(upn="ann@example.test")))
    assert identity.user_id == "ann@example.test"


async def test_hs256_signed_with_the_public_key_is_refused(
    auth: JwtAuthenticator, idp: JwksServer, rsa1: SigningKey
) -> None:
    await rejected(auth, forged_hs256(rsa1, claims()))
    assert idp.reads == 0, "a refused algorithm must not cause a JWKS read"
    # Also with the key at hand: its algorithm is RS256, whatever the token says.
    await auth.authenticate(rsa1.sign(claims()))
    await rejected(auth, forged_hs256(rsa1, claims()))


async def test_alg_none_is_refused(
    auth: JwtAuthenticator, idp: JwksServer, rsa1: SigningKey
) -> None:
    await rejected(auth, unsigned(rsa1.kid, claims()))
    assert idp.reads == 0


async def test_other_asymmetric_algorithms_are_refused(
    auth: JwtAuthenticator, rsa1: SigningKey
) -> None:
    p384 = SigningKey("ec-384", "ES384", ec.generate_private_key(ec.SECP384R1()))
    for key in (SigningKey(rsa1.kid, "RS384", rsa1.private), p384):
        await rejected(auth, key.sign(claims()))
    await rejected(auth, SigningKey(rsa1.kid, "PS256", rsa1.private).sign(claims()))


async def test_a_token_cannot_use_another_algorithm_than_its_key(
    auth: JwtAuthenticator, rsa1: SigningKey, ec1: SigningKey
) -> None:
    # Signed with the EC key, but naming the RSA key's kid: RS256 is that key's algorithm.
    await rejected(auth, SigningKey(rsa1.kid, "ES256", ec1.private).sign(claims()))


async def test_a_token_signed_by_a_key_outside_the_jwks_is_refused(
    auth: JwtAuthenticator, rsa1: SigningKey, rsa2: SigningKey
) -> None:
    # Its kid names a published key, but another private key signed it.
    await rejected(auth, SigningKey(rsa1.kid, "RS256", rsa2.private).sign(claims()))
    await rejected(auth, rsa2.sign(claims()))  # rsa-2 is not published


async def test_a_token_with_a_critical_header_it_does_not_know_is_refused(
    auth: JwtAuthenticator, rsa1: SigningKey
) -> None:
    await rejected(auth, rsa1.sign(claims(), crit=["x-unknown"], **{"x-unknown": 1}))


async def test_a_token_without_a_kid_is_refused(auth: JwtAuthenticator, rsa1: SigningKey) -> None:
    await rejected(auth, jwt.encode(claims(), rsa1.private, algorithm="RS256"))


@pytest.mark.parametrize(
    "token",
    ["", "garbage", "a.b.c", "a.b", "eyJhbGciOiJSUzI1NiJ9..", "Bearer x.y.z", "é.é.é", "." * 5000],
)
async def test_a_malformed_token_is_refused(
    auth: JwtAuthenticator, idp: JwksServer, token: str
) -> None:
    await rejected(auth, token)
    assert idp.reads == 0


# Key rotation and the JWKS read ------------------------------------------------------


async def test_a_new_kid_in_the_jwks_is_read_and_accepted_and_a_removed_key_refused(
    auth: JwtAuthenticator, idp: JwksServer, clock: Clock, rsa1: SigningKey, rsa2: SigningKey
) -> None:
    await auth.authenticate(rsa1.sign(claims()))
    assert idp.reads == 1
    # The provider rotates: rsa-2 published, rsa-1 withdrawn.
    idp.document = jwks(rsa2)
    clock.advance(31)
    assert (await auth.authenticate(rsa2.sign(claims()))).user_id == "subject-1"
    assert idp.reads == 2
    await rejected(auth, rsa1.sign(claims()))
    assert idp.reads == 2, "a second read within the rate limit"


async def test_a_withdrawn_key_is_refused_once_the_cached_set_is_old(
    auth: JwtAuthenticator, idp: JwksServer, clock: Clock, rsa1: SigningKey, ec1: SigningKey
) -> None:
    await auth.authenticate(rsa1.sign(claims()))
    idp.document = jwks(ec1)
    clock.advance(300)
    await auth.authenticate(rsa1.sign(claims()))  # still cached
    clock.advance(301)
    # The old set serves while it is read again, in the background.
    await auth.authenticate(rsa1.sign(claims()))
    await auth.keys.wait_for_read()
    await rejected(auth, rsa1.sign(claims()))
    assert idp.reads == 2


async def test_reading_an_old_set_again_does_not_hold_up_calls(
    auth: JwtAuthenticator, idp: JwksServer, clock: Clock, rsa1: SigningKey
) -> None:
    await auth.authenticate(rsa1.sign(claims()))
    idp.delay = 1.0
    clock.advance(601)
    started = time.monotonic()
    await auth.authenticate(rsa1.sign(claims()))
    assert time.monotonic() - started < 0.5
    await auth.keys.wait_for_read()
    assert idp.reads == 2


async def test_unknown_kids_cannot_make_it_read_in_a_loop(
    auth: JwtAuthenticator, idp: JwksServer, clock: Clock, rsa1: SigningKey, rsa2: SigningKey
) -> None:
    await auth.authenticate(rsa1.sign(claims()))
    garbage = [SigningKey(f"made-up-{i}", "RS256", rsa2.private) for i in range(20)]
    for key in garbage:
        await rejected(auth, key.sign(claims()))
    await asyncio.gather(*(rejected(auth, key.sign(claims())) for key in garbage))
    assert idp.reads == 1
    clock.advance(30)
    await rejected(auth, garbage[0].sign(claims()))
    await rejected(auth, garbage[1].sign(claims()))
    assert idp.reads == 2


async def test_calls_arriving_together_share_one_read(
    auth: JwtAuthenticator, idp: JwksServer, rsa1: SigningKey
) -> None:
    idp.delay = 0.2
    tokens = [rsa1.sign(claims(sub=f"s-{i}")) for i in range(10)]
    identities = await asyncio.gather(*(auth.authenticate(token) for token in tokens))
    assert [i.user_id for i in identities] == [f"s-{i}" for i in range(10)]
    assert idp.reads == 1


async def test_a_jwks_server_that_is_down_refuses_tokens_without_crashing(
    clock: Clock, rsa1: SigningKey
) -> None:
    gone = await JwksServer(jwks(rsa1)).start()
    await gone.stop()
    auth = JwtAuthenticator.from_settings(settings(gone.url), clock=clock)
    await rejected(auth, rsa1.sign(claims()))
    clock.advance(30)
    await rejected(auth, rsa1.sign(claims()))


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (500, None, "HTTP status 500"),
        (404, None, "HTTP status 404"),
        (200, b"<html>sign in</html>", "Expecting value"),
        (200, b'{"keys": "none"}', "no keys list"),
        (200, b'{"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"}]}', "no RS256 or ES256"),
        (200, b" " * (MAX_JWKS_BYTES + 1), f"larger than {MAX_JWKS_BYTES} bytes"),
    ],
    ids=["500", "404", "not json", "no key list", "only an HMAC key", "too large"],
)
async def test_a_bad_jwks_reply_refuses_tokens_and_is_logged(
    idp: JwksServer,
    auth: JwtAuthenticator,
    rsa1: SigningKey,
    caplog: pytest.LogCaptureFixture,
    status: int,
    body: bytes | None,
    error: str,
) -> None:
    idp.status, idp.body = status, body
    with caplog.at_level(logging.WARNING, logger="contextd.jwt"):
        await rejected(auth, rsa1.sign(claims()))
    assert idp.reads == 1
    [failure] = [r for r in caplog.records if r.getMessage() == "jwks read failed"]
    assert error in failure.__dict__["error"]
    assert failure.__dict__["source"] == idp.url


async def test_while_the_provider_is_down_the_last_good_keys_still_serve(
    auth: JwtAuthenticator, idp: JwksServer, clock: Clock, rsa1: SigningKey
) -> None:
    await auth.authenticate(rsa1.sign(claims()))
    idp.status = 503
    clock.advance(601)
    await auth.authenticate(rsa1.sign(claims()))
    await auth.keys.wait_for_read()
    assert idp.reads == 2
    await auth.authenticate(rsa1.sign(claims()))
    clock.advance(30)
    idp.status = 200
    await auth.authenticate(rsa1.sign(claims()))
    await auth.keys.wait_for_read()
    assert idp.reads == 3


async def test_a_jwks_server_that_hangs_is_given_up_on(
    idp: JwksServer, clock: Clock, rsa1: SigningKey
) -> None:
    idp.delay = 5.0
    auth = JwtAuthenticator(
        JwksCache(JwksUrl(idp.url, timeout=0.2), clock=clock),
        issuers=(ISSUER,),
        audiences=(AUDIENCE,),
    )
    started = time.monotonic()
    await rejected(auth, rsa1.sign(claims()))
    assert time.monotonic() - started < 2.0


async def test_the_jwks_can_be_a_file_read_again_when_a_kid_is_new(
    tmp_path: Path, clock: Clock, rsa1: SigningKey, rsa2: SigningKey
) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks(rsa1)), encoding="utf-8")
    auth = JwtAuthenticator.from_settings(settings(str(path)), clock=clock)
    assert (await auth.authenticate(rsa1.sign(claims()))).tenant_id == "t-1"
    path.write_text(json.dumps(jwks(rsa2)), encoding="utf-8")
    await rejected(auth, rsa2.sign(claims()))  # within the rate limit
    clock.advance(30)
    await auth.authenticate(rsa2.sign(claims()))
    await rejected(auth, rsa1.sign(claims()))


# Settings ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"jwt_jwks": ""}, "--jwt-jwks (or CONTEXTD_JWT_JWKS)"),
        ({"jwt_issuer": " "}, "--jwt-issuer (or CONTEXTD_JWT_ISSUER)"),
        ({"jwt_audience": ""}, "--jwt-audience (or CONTEXTD_JWT_AUDIENCE)"),
        ({"jwt_user_claim": ""}, "--jwt-user-claim (or CONTEXTD_JWT_USER_CLAIM)"),
    ],
)
def test_a_missing_setting_is_named(overrides: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")):
        JwtAuthenticator.from_settings(settings("https://idp.example.test/keys", **overrides))


@pytest.mark.parametrize(
    "location",
    ["http://idp.example.test/keys", "ftp://idp.example.test/keys", "/no/such/jwks.json"],
)
def test_an_unusable_jwks_location_is_refused_at_start(location: str) -> None:
    with pytest.raises(ValueError, match="--jwt-jwks"):
        JwtAuthenticator.from_settings(settings(location))


def test_https_and_loopback_http_are_usable_jwks_urls() -> None:
    for location in (
        "https://login.microsoftonline.com/common/discovery/v2.0/keys",
        "http://127.0.0.1:8080/keys",
        "http://[::1]:8080/keys",
        "http://localhost/keys",
    ):
        JwtAuthenticator.from_settings(settings(location))


def test_the_settings_come_from_the_environment() -> None:
    env = {
        "CONTEXTD_JWT_JWKS": "https://idp.example.test/keys",
        "CONTEXTD_JWT_ISSUER": ISSUER,
        "CONTEXTD_JWT_AUDIENCE": AUDIENCE,
        "CONTEXTD_JWT_USER_CLAIM": "oid",
        "CONTEXTD_JWT_TENANT_CLAIM": "",
    }
    auth = JwtAuthenticator.from_settings(Settings.from_env(env))
    assert (auth.user_claim, auth.tenant_claim) == ("oid", "")
    assert (auth.issuers, auth.audiences) == ((ISSUER,), (AUDIENCE,))
    defaults = Settings()
    assert (defaults.jwt_user_claim, defaults.jwt_tenant_claim) == ("sub", "tid")


async def test_only_signing_keys_with_a_kid_are_taken_from_the_jwks(
    idp: JwksServer, auth: JwtAuthenticator, rsa1: SigningKey, rsa2: SigningKey, ec1: SigningKey
) -> None:
    without_kid = {k: v for k, v in ec1.jwk().items() if k != "kid"}
    idp.document = {
        "keys": [
            {**rsa2.jwk(), "use": "enc"},
            without_kid,
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {"kty": "RSA", "kid": "broken"},
            rsa1.jwk(),
        ]
    }
    await auth.authenticate(rsa1.sign(claims()))
    await rejected(auth, rsa2.sign(claims()))


async def test_a_refusal_is_logged_at_debug_without_the_token(
    auth: JwtAuthenticator, rsa1: SigningKey, caplog: pytest.LogCaptureFixture
) -> None:
    token = rsa1.sign(claims(aud="api://another-app"))
    with caplog.at_level(logging.DEBUG, logger="contextd.jwt"):
        await rejected(auth, token)
    [refusal] = [r for r in caplog.records if r.getMessage() == "jwt rejected"]
    assert refusal.levelno == logging.DEBUG
    assert refusal.__dict__["reason"] == "Audience doesn't match"
    signature = token.rsplit(".", 1)[1]
    assert not any(signature in json.dumps(r.__dict__, default=str) for r in caplog.records)


async def test_a_caller_that_goes_away_does_not_cancel_the_read(
    auth: JwtAuthenticator, idp: JwksServer, rsa1: SigningKey
) -> None:
    idp.delay = 0.3
    first = asyncio.create_task(auth.authenticate(rsa1.sign(claims())))
    await asyncio.sleep(0.1)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert (await auth.authenticate(rsa1.sign(claims()))).user_id == "subject-1"
    assert idp.reads == 1

"""An identity provider for token tests: signing keys made here, tokens signed with
them, and their JWKS served from a real local HTTP server (aiohttp, 127.0.0.1)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Any

import jwt
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ISSUER = "https://login.example.test/tenant-a/v2.0"
AUDIENCE = "api://contextd-add-in"


@dataclass(frozen=True)
class SigningKey:
    kid: str
    algorithm: str  # RS256 or ES256
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

    def jwk(self) -> dict[str, Any]:
        public = self.private.public_key()
        exported = (
            RSAAlgorithm.to_jwk(public, as_dict=True)
            if isinstance(public, rsa.RSAPublicKey)
            else ECAlgorithm.to_jwk(public, as_dict=True)
        )
        # As Entra ID publishes them: no "alg", the key type says it.
        return {**exported, "kid": self.kid, "use": "sig"}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def sign(self, claims: dict[str, Any], **header: Any) -> str:
        return jwt.encode(
            claims, self.private, algorithm=self.algorithm, headers={"kid": self.kid, **header}
        )


def rsa_key(kid: str) -> SigningKey:
    return SigningKey(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))


def ec_key(kid: str) -> SigningKey:
    return SigningKey(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))


def jwks(*keys: SigningKey) -> dict[str, Any]:
    return {"keys": [key.jwk() for key in keys]}


def claims(**overrides: Any) -> dict[str, Any]:
    """A valid token's claims for user u-1 of tenant t-1; an override of None drops it."""
    now = int(time.time())
    base: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "subject-1",
        "tid": "t-1",
        "iat": now,
        "nbf": now,
        "exp": now + 600,
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged_hs256(key: SigningKey, payload: dict[str, Any]) -> str:
    """The algorithm-confusion attack: HS256 with the public key as the HMAC secret.
    Built by hand because PyJWT rightly refuses to sign it."""
    header = {"alg": "HS256", "typ": "JWT", "kid": key.kid}
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(payload).encode())}"
    mac = hmac.new(key.public_pem(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(mac)}"


def unsigned(kid: str, payload: dict[str, Any]) -> str:
    """``alg: none``: no signature at all."""
    return jwt.encode(payload, "", algorithm="none", headers={"kid": kid})


@dataclass
class JwksServer:
    """Serves ``document`` at ``/keys``; counts the reads. ``status`` other than 200
    answers an error, ``body`` replaces the document's bytes, ``delay`` holds the reply."""

    document: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    body: bytes | None = None
    delay: float = 0.0
    reads: int = 0
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/keys"

    async def start(self) -> JwksServer:
        app = web.Application()
        app.router.add_get("/keys", self._keys)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _keys(self, request: web.Request) -> web.Response:
        self.reads += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.status != 200:
            return web.Response(status=self.status, text="unavailable")
        body = self.body if self.body is not None else json.dumps(self.document).encode()
        return web.Response(body=body, content_type="application/json")

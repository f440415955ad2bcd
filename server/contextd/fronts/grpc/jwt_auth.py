"""Bearer tokens of an OpenID Connect identity provider (Microsoft Entra ID for Office
single sign-on, or any other) turned into the caller's Identity.

A token is accepted when a key of the provider's JWKS signed it with RS256 or ES256,
it names the configured issuer and audience, it has not expired (``exp`` is required)
and is already valid, allowing a minute of clock skew either way, and it carries
``sub``, the user claim and, when one is configured, the tenant claim as non-empty
strings. Anything else is Unauthenticated with the one generic message; the reason
is logged at DEBUG only, without the token.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

import jwt

from contextd.config import Settings
from contextd.core.errors import Unauthenticated
from contextd.core.identity import DEFAULT_TENANT, TENANT_ID_RULE, Identity, is_tenant_id
from contextd.fronts.grpc.jwks import ALLOWED_ALGORITHMS, JwksCache, jwks_source

log = logging.getLogger("contextd.jwt")

CLOCK_SKEW_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class JwtAuthenticator:
    keys: JwksCache
    _: KW_ONLY
    issuers: tuple[str, ...]
    audiences: tuple[str, ...]
    user_claim: str = "sub"
    # Empty: the provider names no tenant and every user is in the default one.
    tenant_claim: str = "tid"

    @classmethod
    def from_settings(
        cls, settings: Settings, *, clock: Callable[[], float] = time.monotonic
    ) -> JwtAuthenticator:
        """The authenticator the ``--jwt-*`` settings describe; ValueError naming the
        flag when one that ``--auth jwt`` needs is missing or unusable."""
        for flag, value in (
            ("--jwt-jwks", settings.jwt_jwks),
            ("--jwt-issuer", settings.jwt_issuer),
            ("--jwt-audience", settings.jwt_audience),
            ("--jwt-user-claim", settings.jwt_user_claim),
        ):
            if not value.strip():
                variable = "CONTEXTD_" + flag[2:].replace("-", "_").upper()
                raise ValueError(f"--auth jwt needs {flag} (or {variable})")
        return cls(
            JwksCache(jwks_source(settings.jwt_jwks.strip()), clock=clock),
            issuers=_split(settings.jwt_issuer),
            audiences=_split(settings.jwt_audience),
            user_claim=settings.jwt_user_claim.strip(),
            tenant_claim=settings.jwt_tenant_claim.strip(),
        )

    async def authenticate(self, token: str) -> Identity:
        """The identity ``token`` proves; Unauthenticated when it proves none."""
        try:
            claims = await self._verified_claims(token)
            return self._identity(claims)
        except (jwt.PyJWTError, _Rejected) as error:
            log.debug("jwt rejected", extra={"reason": str(error) or type(error).__name__})
            raise Unauthenticated() from None

    async def _verified_claims(self, token: str) -> Mapping[str, Any]:
        header = jwt.get_unverified_header(token)
        algorithm, kid = header.get("alg"), header.get("kid")
        # Checked before the key lookup so that such tokens never cause a JWKS read.
        if algorithm not in ALLOWED_ALGORITHMS:
            raise _Rejected(f"algorithm {algorithm!r} not allowed")
        if not isinstance(kid, str) or not kid:
            raise _Rejected("no kid in the header")
        key = await self.keys.key(kid)
        if key is None:
            raise _Rejected(f"no key with kid {kid!r}")
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            # The key's own algorithm only: a token cannot pick another one for this key.
            algorithms=[key.algorithm_name],
            issuer=self.issuers,
            audience=self.audiences,
            leeway=CLOCK_SKEW_SECONDS,
            options={"require": ["exp", "iss", "aud", "sub", self.user_claim]},
        )
        return claims

    def _identity(self, claims: Mapping[str, Any]) -> Identity:
        user = _text_claim(claims, self.user_claim)
        tenant = _text_claim(claims, self.tenant_claim) if self.tenant_claim else DEFAULT_TENANT
        if not is_tenant_id(tenant):
            # It would name a directory of event logs: only plain names are tenants.
            raise _Rejected(f"claim {self.tenant_claim!r} is not a tenant id ({TENANT_ID_RULE})")
        # The subject, never the token: it is what logs may name.
        return Identity(user, tenant, credential_id="jwt:" + _text_claim(claims, "sub"))


class _Rejected(Exception):
    """Why a token was refused, for the debug log."""


def _text_claim(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if not isinstance(value, str) or not value:
        raise _Rejected(f"claim {name!r} is not a non-empty string")
    return value


def _split(values: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in values.split(",") if v.strip())

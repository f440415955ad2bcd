"""The caller a request acts as, and the API key authenticator, without a server."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from contextd.app.scope import Caller
from contextd.core.api_keys import hash_secret, new_key
from contextd.core.errors import InvalidArgument, PermissionDenied, Unauthenticated
from contextd.core.identity import Identity
from contextd.fronts.grpc.api_key_auth import ApiKeyAuthenticator
from contextd.fronts.grpc.auth import bearer_token, caller_for, current_identity


def test_without_an_identity_the_request_names_the_caller() -> None:
    assert caller_for("u1") == Caller("u1")
    with pytest.raises(InvalidArgument):
        caller_for("")


def test_with_an_identity_the_caller_is_its_user() -> None:
    reset = current_identity.set(Identity("alice", credential_id="k1"))
    try:
        assert caller_for("") == Caller("alice")
        assert caller_for("alice") == Caller("alice")
        with pytest.raises(PermissionDenied):
            caller_for("bob")
    finally:
        current_identity.reset(reset)


def test_a_service_identity_acts_for_any_user() -> None:
    reset = current_identity.set(Identity("backend", service=True))
    try:
        assert caller_for("bob") == Caller("bob")
        assert caller_for("") == Caller("backend")
    finally:
        current_identity.reset(reset)


@pytest.mark.parametrize(
    ("metadata", "token"),
    [
        ([("authorization", "Bearer abc")], "abc"),
        ([("authorization", "bearer abc ")], "abc"),
        ([("authorization", "Basic abc")], None),
        ([("authorization", "Bearer ")], None),
        ([("authorization", "Bearer a"), ("authorization", "Bearer b")], None),
        ([("x-other", "Bearer abc")], None),
        (None, None),
    ],
)
def test_bearer_token(metadata: list[tuple[str, str]] | None, token: str | None) -> None:
    assert bearer_token(metadata) == token


@dataclass
class _Key:
    secret_hash: str
    user_id: str = "alice"
    tenant_id: str = "default"
    service: bool = False
    expires_at: float | None = None
    revoked: bool = False

    def usable_at(self, now: float) -> bool:
        return not self.revoked and (self.expires_at is None or now < self.expires_at)


@dataclass
class _Keys:
    rows: dict[str, _Key] = field(default_factory=dict)
    marked: list[tuple[str, float]] = field(default_factory=list)

    async def get(self, key_id: str) -> _Key | None:
        return self.rows.get(key_id)

    async def mark_used(self, key_id: str, at: float) -> None:
        self.marked.append((key_id, at))


async def test_api_keys_prove_their_user_until_revoked_or_expired() -> None:
    now = [1000.0]
    keys = _Keys()
    auth = ApiKeyAuthenticator(keys, clock=lambda: now[0], monotonic=lambda: now[0])
    parts = new_key()
    keys.rows[parts.key_id] = _Key(hash_secret(parts.secret), expires_at=2000.0)
    assert await auth.authenticate(parts.token) == Identity("alice", "default", False, parts.key_id)
    # last used: noted on first use, then at most once a minute.
    for step in (1.0, 30.0, 61.0):
        now[0] = 1000.0 + step
        await auth.authenticate(parts.token)
    assert keys.marked == [(parts.key_id, 1000.0), (parts.key_id, 1061.0)]
    # A revocation, written elsewhere, counts once the cached row is half a second old.
    keys.rows[parts.key_id] = _Key(hash_secret(parts.secret), revoked=True)
    now[0] = 1061.4
    await auth.authenticate(parts.token)
    now[0] = 1061.5
    with pytest.raises(Unauthenticated):
        await auth.authenticate(parts.token)
    # An expiry counts on the dot, cached row or not.
    keys.rows[parts.key_id] = _Key(hash_secret(parts.secret), expires_at=2000.0)
    now[0] = 1999.9
    await auth.authenticate(parts.token)
    now[0] = 2000.0
    with pytest.raises(Unauthenticated):
        await auth.authenticate(parts.token)
    for bad in ("garbage", new_key().token, f"ctxd_{parts.key_id}_{new_key().secret}"):
        with pytest.raises(Unauthenticated):
            await auth.authenticate(bad)

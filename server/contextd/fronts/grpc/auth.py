"""Who is calling: the credential check's seam and the one rule for request user ids.

Every mode (``--auth api-key``, a token mode) is an ``Authenticator``: it turns the
bearer token of a call into an ``Identity`` or raises ``Unauthenticated``. The
``GuardInterceptor`` runs it once per call, before the servicer, and puts the result
in ``current_identity``. Each call runs in its own asyncio task and a task starts from a
copy of the server's context, where the identity is None, so a value set for one call
is never seen by another; the servicer, and anything it awaits, reads the caller's.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from typing import Protocol

from contextd.app.scope import Caller
from contextd.core.errors import PermissionDenied
from contextd.core.identity import DEFAULT_TENANT, Identity

# None: the server runs with ``--auth none``, or the method needs no credential.
current_identity: ContextVar[Identity | None] = ContextVar("current_identity", default=None)

_BEARER = "bearer "


class Authenticator(Protocol):
    async def authenticate(self, token: str) -> Identity:
        """The identity ``token`` proves; raises ``Unauthenticated`` when it proves none."""
        ...


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The token of the call's ``authorization: Bearer <token>``; None when absent or
    malformed (several authorization entries count as malformed)."""
    found: str | None = None
    for key, value in metadata or ():
        if key != "authorization":
            continue
        if found is not None or not isinstance(value, str):
            return None
        found = value
    if found is None or found[: len(_BEARER)].lower() != _BEARER:
        return None
    return found[len(_BEARER) :].strip() or None


def caller_for(user_id: str, field: str = "user_id") -> Caller:
    """The caller a request acts as, from its ``user_id`` field and the call's identity.

    Without an identity (``--auth none``) the field names the caller, who is in the
    default tenant, and is required. With one, the caller is always in the identity's
    tenant: an empty field means the identity's user and the same user is fine; another
    user is PERMISSION_DENIED, except for a service credential, which may act for any
    user of its own tenant (the field names a user of that tenant, never of another).
    """
    identity = current_identity.get()
    if identity is None:
        return Caller.of(user_id, field)
    if not user_id or user_id == identity.user_id:
        return Caller(identity.user_id, identity.tenant_id)
    if identity.service:
        return Caller.of(user_id, field, identity.tenant_id)
    raise PermissionDenied(f"{field} names another user than the credential's")


def caller_tenant() -> str:
    """The tenant a call naming no user acts in (templates and skills): the identity's,
    or the default tenant without one (``--auth none``)."""
    identity = current_identity.get()
    return DEFAULT_TENANT if identity is None else identity.tenant_id

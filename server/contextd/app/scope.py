"""Who is calling, and the one place that decides what they may touch.

api/ makes the Caller (``api.auth.caller_for``): from the request's user id, or, when
the server checks credentials, from the identity the call's credential proves. The
checks here are the same either way.

A user is a user of a tenant: "bob" of one tenant and "bob" of another are two users.
Repositories read and write only the caller's tenant, so a resource of another tenant
is not found (NOT_FOUND, never revealing that it exists); one of another user of the
same tenant is PERMISSION_DENIED.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contextd.core.errors import InvalidArgument, NotFound, PermissionDenied
from contextd.core.identity import DEFAULT_TENANT

_USER_ID = re.compile(r"[^\s]{1,128}")


@dataclass(frozen=True, slots=True)
class Caller:
    user_id: str
    tenant_id: str = DEFAULT_TENANT

    @classmethod
    def of(cls, user_id: str, field: str = "user_id", tenant_id: str = DEFAULT_TENANT) -> Caller:
        if not _USER_ID.fullmatch(user_id):
            raise InvalidArgument.one(field, "required: 1-128 characters without spaces")
        return cls(user_id, tenant_id)

    def check_owner(self, owner_user_id: str, what: str) -> None:
        """PERMISSION_DENIED unless the caller owns the resource."""
        if owner_user_id != self.user_id:
            raise PermissionDenied(f"{what} belongs to another user")


def parse_id(value: str, field: str, what: str) -> int:
    """A numeric stored id from its string form; a malformed one names the field."""
    if not value:
        raise InvalidArgument.one(field, f"a {what} id is required")
    if not value.isdigit() or len(value) > 18:
        raise NotFound(f"no {what} with id {value!r}")
    return int(value)

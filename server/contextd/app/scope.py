"""Who is calling, and the one place that decides what they may touch: their sessions
and memories, and which of their memories each use sees (``session_memories``).

The gRPC front makes the Caller (``fronts.grpc.auth.caller_for``): from the request's
user id, or, when the server checks credentials, from the identity the call's
credential proves. The checks here are the same either way.

A user is a user of a tenant: "bob" of one tenant and "bob" of another are two users.
Repositories read and write only the caller's tenant, so a resource of another tenant
is not found; one of another user of the same tenant is not found either, with the same
message as one that does not exist, so that no answer tells another user's id from an
unknown one.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from contextd.core.errors import InvalidArgument, NotFound, SessionNotFound
from contextd.core.identity import DEFAULT_TENANT
from contextd.store.memory.filters import MemoryFilter
from contextd.store.models import Session
from contextd.store.sessions import SessionRepo

_PRINTABLE_ASCII = re.compile(r"[!-~]{1,128}")
# Characters a user id may not hold: spaces, controls (NUL...), format characters
# (bidi overrides, zero-width joiners) that make two ids look alike, and code points
# that are private, surrogates or unassigned.
_HIDDEN = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"})


def is_user_id(value: str) -> bool:
    if _PRINTABLE_ASCII.fullmatch(value):  # the common case, without a look per character
        return True
    return 0 < len(value) <= 128 and all(unicodedata.category(c) not in _HIDDEN for c in value)


@dataclass(frozen=True, slots=True)
class Caller:
    user_id: str
    tenant_id: str = DEFAULT_TENANT

    @classmethod
    def of(cls, user_id: str, field: str = "user_id", tenant_id: str = DEFAULT_TENANT) -> Caller:
        if not is_user_id(user_id):
            raise InvalidArgument.one(
                field, "required: 1-128 visible characters, no spaces, controls or format marks"
            )
        return cls(user_id, tenant_id)

    def owns(self, owner_user_id: str) -> bool:
        """Whether a resource of the caller's tenant owned by ``owner_user_id`` is the
        caller's; one that is not is answered as not found."""
        return owner_user_id == self.user_id


# ASCII digits only: str.isdigit() also takes '²', '①', '١' or '𝟙', and int() reads some
# of those as another id. 18 digits stay within SQLite's 64-bit integers.
_STORED_ID = re.compile(r"[0-9]{1,18}")


def is_stored_id(value: str) -> bool:
    """Whether ``value`` can be a stored id's string form."""
    return _STORED_ID.fullmatch(value) is not None


def parse_id(value: str, field: str, what: str) -> int:
    """A numeric stored id from its string form (the gRPC front decodes the id a caller sent into
    it); an empty one names the field."""
    if not value:
        raise InvalidArgument.one(field, f"a {what} id is required")
    if not is_stored_id(value):
        raise not_found(what, field)
    return int(value)


def not_found(what: str, field: str) -> NotFound:
    """The answer for an id in ``field`` that names no ``what`` of the caller's: the
    same whether it never existed, was deleted, or is another user's or tenant's. It
    quotes no id: the one app/ holds is the store's row number, not the caller's."""
    return NotFound(f"no {what} with the id in {field}")


# Which of a user's memories each use sees, by scope.
#
# * A session's build (the ``memory`` layer) and its chat's ``memory_search`` tool see the
#   user's memories of no scope and those of the session's host app (``Session.host``, e.g.
#   "word"; the build request's host when it names one), of no agent: what the user told
#   any host, and what this host noted for itself. Memories of an agent are seen only by
#   calls that name the agent.
# * The work after a turn weighs new facts against the user's memories of no scope, and
#   writes its facts there: scoped memories are their host's to change.
#
# How long a scope's memories are kept by default is app/memories.py's ExpiryDefaults.
USER_FACTS = MemoryFilter(agents=("",), apps=("",))


def session_memories(host: str) -> MemoryFilter:
    """The memories a session of ``host`` sees (see the module doc)."""
    return MemoryFilter(agents=("",), apps=("", host) if host else ("",))


async def owned_session(sessions: SessionRepo, caller: Caller, session_id: str) -> Session:
    """The caller's session ``session_id``; SessionNotFound for another user's or another
    tenant's, whose existence is not revealed."""
    if not session_id:
        raise InvalidArgument.one("session_id", "required")
    session = await sessions.get(session_id, tenant_id=caller.tenant_id)
    if session is None or not caller.owns(session.user_id):
        raise SessionNotFound(session_id)
    return session

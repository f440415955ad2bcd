"""Domain errors raised by core/, app/ and store/; the gRPC front maps them to status codes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# How many characters of a value a caller sent an error message, a status detail or a
# log line quotes: enough to recognise it, never enough to flood a log or overflow a
# client's metadata limit with trailers (a 100,000-character id would otherwise come
# back whole, twice).
SHOWN_CHARS = 40


def cut(value: str, limit: int = SHOWN_CHARS) -> str:
    """``value`` as a log line or span attribute carries it: at most ``limit`` of its
    characters, a longer one marked with how many more it had."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}…(+{len(value) - limit} chars)"


def shown(value: str, limit: int = SHOWN_CHARS) -> str:
    """``value`` quoted for a message (controls and bidi marks escaped, as repr does), at
    most ``limit`` of its characters; a longer one is marked with how many more it had."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}…(+{len(value) - limit} chars)"


@dataclass(frozen=True, slots=True)
class FieldViolation:
    field: str
    description: str


class ContextdError(Exception):
    """Base of the errors a caller can act on."""


class InvalidArgument(ContextdError):
    """One or more request fields are invalid (INVALID_ARGUMENT with field violations)."""

    def __init__(self, violations: Iterable[FieldViolation]) -> None:
        self.violations = tuple(violations)
        if not self.violations:
            raise ValueError("InvalidArgument needs at least one violation")
        super().__init__("; ".join(f"{v.field}: {v.description}" for v in self.violations))

    @classmethod
    def one(cls, field: str, description: str) -> InvalidArgument:
        return cls([FieldViolation(field, description)])


class NotFound(ContextdError):
    """The named resource does not exist."""


class SessionNotFound(NotFound):
    """The session does not exist (or, to a write that names a user, is not the user's):
    never made, or deleted, also while a chat turn on it was running."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session with id {shown(session_id)}")
        self.session_id = session_id


class PermissionDenied(ContextdError):
    """The resource belongs to another user."""


class Unauthenticated(ContextdError):
    """The call carries no credential the server accepts. Missing, malformed, unknown,
    expired and revoked credentials all get the same message, so a caller learns
    nothing about which keys exist."""

    def __init__(self) -> None:
        super().__init__("a valid credential is required")


class ResourceExhausted(ContextdError):
    """The caller is over a limit (request rate, turns at once); worth retrying after
    ``retry_after_s`` seconds."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class StorageFull(ResourceExhausted):
    """The data directory's disk has no room for a write; the write was undone."""

    def __init__(self) -> None:
        super().__init__("the server's disk is full; nothing of this call was stored", 5.0)


class Unavailable(ContextdError):
    """A dependency (the store, a provider) cannot serve the request right now."""


class DatabaseUnavailable(Unavailable):
    """The database server cannot be reached, dropped the connection, has no free
    connection in the pool in time, or cancelled a statement that ran too long; the
    transaction the call had open was rolled back."""


class SessionBusy(Unavailable):
    """A turn of the session runs in another process sharing the database and did not
    end within the call's time."""


class FailedPrecondition(ContextdError):
    """The request is valid but cannot be served in the current state."""


class BudgetExceeded(FailedPrecondition):
    """System prompt and user message alone exceed the budget and the caller asked to fail."""


class TokenizerUnavailable(FailedPrecondition):
    """A known tokenizer whose encoding file is not on this machine."""


class Violations:
    """Collects field violations so one response can name every bad field."""

    def __init__(self) -> None:
        self._items: list[FieldViolation] = []

    def add(self, field: str, description: str) -> None:
        self._items.append(FieldViolation(field, description))

    def extend(self, items: Iterable[FieldViolation]) -> None:
        self._items.extend(items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def raise_if_any(self) -> None:
        if self._items:
            raise InvalidArgument(self._items)

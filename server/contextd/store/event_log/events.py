"""What an event is on every engine, and what every session's event log answers.

Every line is one JSON event with these keys, in this order, a None field left out: ts,
session_id, turn, step, type, content, role, meta. A session's log is JSONL files with
SQLite (store/event_log/files.py), rows of a table with PostgreSQL, whose replicas share
no disk (store/event_log/table.py): the same lines, byte for byte, and the same reads.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from contextd.core.errors import Violations
from contextd.core.identity import DEFAULT_TENANT
from contextd.store.models import Session, check_session_id

if TYPE_CHECKING:
    from contextd.store.engine.database import Connection, JoinedWrite

# The folder of a data directory that holds the event logs' files (SQLite; on PostgreSQL
# they are rows and the folder stays unused).
HISTORY_DIR = "history"

EVENT_TYPES = frozenset(
    {
        "session_start",
        "turn_start",
        "assistant",
        "action",
        "observation",
        "final",
        "turn_end",
        "session_end",
    }
)
ROLES = frozenset({"system", "user", "assistant"})

# allow_nan=False: NaN/Infinity are not JSON and a strict reader would reject them.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# A session mode (session_start's and session_end's meta.mode) is the client's own
# short word; printable so that a log or an export shows it as it is.
MAX_MODE = 64


def check_mode(mode: str, field: str, v: Violations) -> None:
    """A session mode: empty (the default), or at most MAX_MODE printable characters,
    not all spaces."""
    if mode and (len(mode) > MAX_MODE or not mode.isprintable() or mode.isspace()):
        v.add(field, f"at most {MAX_MODE} printable characters, not all spaces")


def event_tokens(
    prompt: int | None,
    completion: int | None,
    *,
    cache_read: int = 0,
    cache_write: int = 0,
    estimated: bool = False,
) -> dict[str, int | bool]:
    """``meta.tokens``: the counts given, with ``total`` only when both are known; the
    prompt-cache counts when not 0, and ``estimated`` when a figure was counted locally."""
    tokens: dict[str, int | bool] = {}
    if prompt is not None:
        tokens["prompt"] = prompt
    if completion is not None:
        tokens["completion"] = completion
    if prompt is not None and completion is not None:
        tokens["total"] = prompt + completion
    if cache_read:
        tokens["cacheRead"] = cache_read
    if cache_write:
        tokens["cacheWrite"] = cache_write
    if estimated:
        tokens["estimated"] = True
    return tokens


def format_ts(ts: float) -> str:
    """Epoch seconds as ISO 8601 UTC with milliseconds: 2024-05-10T12:00:00.123Z."""
    seconds, millis = divmod(round(ts * 1000), 1000)
    return f"{_format_seconds(seconds)}.{millis:03d}Z"


@functools.lru_cache(maxsize=4)
def _format_seconds(seconds: int) -> str:
    # Events come in bursts within one second: its text is made once.
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


def _check_index(name: str, value: int | None, minimum: int) -> None:
    if value is not None and (
        not isinstance(value, int) or isinstance(value, bool) or value < minimum
    ):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def encode_event(
    session_id: str,
    type: str,
    turn: int | None,
    step: int | None,
    content: str | None,
    role: str | None,
    meta: dict[str, Any] | None,
    ts: float | None,
) -> tuple[dict[str, Any], str]:
    """A checked event and its JSON line (without the newline), the same on every engine."""
    check_session_id(session_id)
    if type not in EVENT_TYPES:
        raise ValueError(f"type must be one of {sorted(EVENT_TYPES)}, got {type!r}")
    if role is not None and role not in ROLES:
        raise ValueError(f"role must be one of {sorted(ROLES)}, got {role!r}")
    _check_index("turn", turn, 1)
    _check_index("step", step, 0)
    if content is not None and not isinstance(content, str):
        raise ValueError(f"content must be a string, got {content!r}")
    if meta is not None and not isinstance(meta, dict):
        raise ValueError(f"meta must be a dict, got {meta!r}")

    event: dict[str, Any] = {
        "ts": format_ts(time.time() if ts is None else ts),
        "session_id": session_id,
    }
    for key, value in (
        ("turn", turn),
        ("step", step),
        ("type", type),
        ("content", content),
        ("role", role),
        ("meta", meta),
    ):
        if value is not None:
            event[key] = value
    return event, _ENCODER.encode(event)


def _check_after_line(after_line: int) -> None:
    if isinstance(after_line, bool) or not isinstance(after_line, int) or after_line < 0:
        raise ValueError(f"after_line must be an integer >= 0, got {after_line!r}")


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event for ``EventStore.append_many``, as ``append``'s arguments."""

    type: str
    turn: int | None = None
    step: int | None = None
    content: str | None = None
    role: str | None = None
    meta: dict[str, Any] | None = None
    # When it happened (time.time()); None: when it is written.
    ts: float | None = None

    def encoded(self, session_id: str, now: float) -> tuple[dict[str, Any], str]:
        ts = now if self.ts is None else self.ts
        return encode_event(
            session_id, self.type, self.turn, self.step, self.content, self.role, self.meta, ts
        )


def encoded_events(
    session_id: str, events: Sequence[NewEvent]
) -> tuple[list[dict[str, Any]], list[str]]:
    """``events`` as written one after the other now: the events and their lines."""
    now = time.time()
    encoded = [e.encoded(session_id, now) for e in events]
    return [event for event, _ in encoded], [line for _, line in encoded]


@dataclass(frozen=True, slots=True)
class LogLines:
    """Lines of a session's log to be written with a write of its messages: ``joined``,
    the write that commits with it (``EventStore.joined``), where the log can join one;
    None: they are appended once that write committed."""

    events: tuple[NewEvent, ...]
    joined: JoinedWrite | None

    @property
    def also(self) -> tuple[JoinedWrite, ...]:
        """ConversationRepo's ``also`` for them."""
        return () if self.joined is None else (self.joined,)


class SessionLogs(Protocol):
    """Where an engine keeps the sessions' logs (store/event_log/files.py, table.py): it
    writes, reads and removes their lines. ``EventStore`` checks the events and the line
    numbers; an engine checks the session and tenant ids it keeps them under."""

    async def write(self, session_id: str, tenant_id: str, lines: list[str]) -> None:
        """The lines after the session's last, in one write: all of them or none."""

    def joined(self, session_id: str, tenant_id: str, lines: list[str]) -> JoinedWrite | None:
        """The lines as a write that commits with a write of the session's messages
        (store/conversation.py's ``also``); None where they cannot be written that way."""

    def read(
        self, session_id: str, after_line: int, tenant_id: str
    ) -> AsyncIterator[dict[str, Any]]: ...

    async def last(self, session_id: str, tenant_id: str) -> dict[str, Any] | None: ...

    async def delete(self, session_id: str, tenant_id: str) -> bool: ...

    async def deleted_with_sessions(
        self, conn: Connection, session_ids: Sequence[str]
    ) -> int | None:
        """How many of these sessions' logs ``conn``'s transaction deletes with their rows
        (a table's foreign key); None when the logs outlive the rows, to be removed after
        the commit (files: store/event_log/removals.py)."""


class EventStore:
    """A session's event log, whichever engine keeps it: the same lines, the same reads.
    Events are encoded here alike for every engine (encode_event, encoded_events); the
    engine's ``SessionLogs`` keeps their lines."""

    def __init__(self, logs: SessionLogs) -> None:
        self._logs = logs
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the event log is closed")

    async def append(
        self,
        session_id: str,
        type: str,
        *,
        turn: int | None = None,
        step: int | None = None,
        content: str | None = None,
        role: str | None = None,
        meta: dict[str, Any] | None = None,
        ts: float | None = None,
        tenant_id: str = DEFAULT_TENANT,
    ) -> dict[str, Any]:
        """Write one event of the tenant's session and return it once it is written."""
        event, line = encode_event(session_id, type, turn, step, content, role, meta, ts)
        self._check_open()
        await self._logs.write(session_id, tenant_id, [line])
        return event

    async def append_many(
        self, session_id: str, events: Sequence[NewEvent], *, tenant_id: str = DEFAULT_TENANT
    ) -> list[dict[str, Any]]:
        """Write ``events`` one after the other in one write (one statement, one system
        call): all of them or, on error, none; they are returned once written."""
        written, lines = encoded_events(session_id, events)
        self._check_open()
        await self._logs.write(session_id, tenant_id, lines)
        return written

    def joined(
        self, session_id: str, events: Sequence[NewEvent], *, tenant_id: str = DEFAULT_TENANT
    ) -> JoinedWrite | None:
        """``events`` as a write that commits with a write of the session's messages
        (store/conversation.py's ``also``), or not at all; None where the engine cannot
        write them that way (files): then ``append_many`` writes them after it."""
        _, lines = encoded_events(session_id, events)
        self._check_open()
        return self._logs.joined(session_id, tenant_id, lines)

    def read(
        self, session_id: str, *, after_line: int = 0, tenant_id: str = DEFAULT_TENANT
    ) -> AsyncIterator[dict[str, Any]]:
        """The session's events in order, after its first ``after_line`` lines: a snapshot
        of the log as it was when the read started, a torn last line left out. To page,
        pass ``after_line`` plus the number of events received as the next one."""
        _check_after_line(after_line)
        return self._logs.read(session_id, after_line, tenant_id)

    async def last(
        self, session_id: str, *, tenant_id: str = DEFAULT_TENANT
    ) -> dict[str, Any] | None:
        """The session's last whole event; None when it has none."""
        return await self._logs.last(session_id, tenant_id)

    async def delete(self, session_id: str, *, tenant_id: str = DEFAULT_TENANT) -> bool:
        """Remove the session's log; True if it had lines. An append after this starts the
        log again at line 1."""
        self._check_open()
        return await self._logs.delete(session_id, tenant_id)

    async def aclose(self) -> None:
        """Refuse new appends and deletes (every earlier one is already written)."""
        self._closed = True

    async def deleted_with_sessions(
        self, conn: Connection, session_ids: Sequence[str]
    ) -> int | None:
        """See ``SessionLogs.deleted_with_sessions``."""
        return await self._logs.deleted_with_sessions(conn, session_ids)


class EventLines(Protocol):
    """A session's event log as lines of text without their newlines, for ``contextd store
    copy`` (a torn last line is not a line)."""

    def batches(self, tenant_id: str, session_id: str) -> AsyncIterator[list[str]]: ...

    async def count(self, tenant_id: str, session_id: str) -> int: ...

    async def write(
        self, tenant_id: str, session_id: str, batches: AsyncIterator[list[str]]
    ) -> int:
        """Write a log the store holds no line of; how many lines were written."""


class SessionLog:
    """A session's event log: its session_start and session_end lines."""

    __slots__ = ("_events", "_session_id", "_tenant_id")

    def __init__(self, events: EventStore, session: Session) -> None:
        self._events = events
        self._session_id = session.id
        self._tenant_id = session.tenant_id

    async def ended(self) -> bool:
        """Whether the log ends with session_end (nothing since EndSession)."""
        last = await self._events.last(self._session_id, tenant_id=self._tenant_id)
        return last is not None and last.get("type") == "session_end"

    async def needs_start(self, known_open: bool | None = None) -> bool:
        """Whether a turn must write session_start first: the log is empty (a new
        session, or one whose messages the host appended) or ends with session_end.
        ``known_open``: whether the log has lines and does not end with session_end, when
        the caller read it already (None: read here)."""
        if known_open is not None:
            return not known_open
        last = await self._events.last(self._session_id, tenant_id=self._tenant_id)
        return last is None or last.get("type") == "session_end"

    async def start(self, meta: dict[str, object]) -> None:
        await self._events.append(
            self._session_id, "session_start", meta=meta, tenant_id=self._tenant_id
        )

    async def end(self, meta: dict[str, object]) -> None:
        await self._events.append(
            self._session_id, "session_end", meta=meta, tenant_id=self._tenant_id
        )

    async def delete(self) -> None:
        await self._events.delete(self._session_id, tenant_id=self._tenant_id)

"""The event log: one JSONL file per session, history_dir/<session_id>.jsonl for the
default tenant's sessions and history_dir/tenants/<tenant_id>/<session_id>.jsonl for
another tenant's (tenant ids are plain names, core/identity.py, checked again here).

Every line is one JSON event with these keys, in this order, a None field left out: ts,
session_id, turn, step, type, content, role, meta.

``append`` encodes its line and writes it with one ``os.write`` on the event loop's
thread, before it returns: a session's lines land in the order ``append`` was called and
never interleave, with no lock and no queue. An append is a few system calls (open,
fstat, a one-byte pread, write, close); a hand-off to a writer thread and back cost more
than that in CPU alone (bench/README.md, "Measured costs behind the code"), and its
Python code competed with the event loop for the GIL. The price: a stalled disk stalls
the event loop.

A line is handed to the kernel (a raw fd, no user-space buffer) before its
``append`` returns: an appended event survives a crash of the process (SIGKILL
included) but not a power cut or a kernel crash, since nothing calls fsync.

A crash in the middle of a write can leave a torn last line (no trailing newline).
Readers skip it; the next write to that file first cuts it off, so the file stays a
sequence of whole lines and line numbers (``read(after_line=...)``) stay stable.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any, Protocol

from contextd.core.errors import StorageFull
from contextd.core.identity import DEFAULT_TENANT, TENANT_ID_RULE, is_tenant_id
from contextd.store.engine.disk import DiskWatch

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

_SESSION_ID = re.compile(r"[0-9a-f]{32}")
# allow_nan=False: NaN/Infinity are not JSON and a strict reader would reject them.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_READ_CHUNK = 256 * 1024
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


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


def check_session_id(session_id: str) -> str:
    """A session id is 32 lowercase hex characters (uuid4().hex); anything else could
    name a path outside history_dir, so it is refused."""
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise ValueError(f"session_id must be 32 lowercase hex characters, got {session_id!r}")
    return session_id


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


def check_after_line(after_line: int) -> None:
    if isinstance(after_line, bool) or not isinstance(after_line, int) or after_line < 0:
        raise ValueError(f"after_line must be an integer >= 0, got {after_line!r}")


class EventStore(Protocol):
    """A session's event log, whichever engine keeps it (this module's files, or
    store/pg_events.py's table): the same lines, the same reads."""

    # Whether a session's log is deleted with the session's row, in its transaction
    # (a table's foreign key), rather than after the commit (store/log_removals.py).
    goes_with_session: bool

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
    ) -> dict[str, Any]: ...

    def read(
        self, session_id: str, *, after_line: int = 0, tenant_id: str = DEFAULT_TENANT
    ) -> AsyncIterator[dict[str, Any]]: ...

    async def last(
        self, session_id: str, *, tenant_id: str = DEFAULT_TENANT
    ) -> dict[str, Any] | None: ...

    async def delete(self, session_id: str, *, tenant_id: str = DEFAULT_TENANT) -> bool: ...

    async def aclose(self) -> None: ...


class EventLog:
    goes_with_session = False  # files: removed after the commit

    def __init__(self, history_dir: Path) -> None:
        self.history_dir = history_dir
        history_dir.mkdir(parents=True, exist_ok=True)
        self._closed = False
        # Told of an append that failed for want of space (set by the server).
        self.disk: DiskWatch | None = None
        # Joined as text: cheaper than a Path per event. Tenant -> its directory, made
        # on its first append.
        self._dirs = {DEFAULT_TENANT: os.fspath(history_dir)}

    def tenant_dir(self, tenant_id: str) -> Path:
        """Where the tenant's files are: history_dir itself for the default tenant."""
        if tenant_id == DEFAULT_TENANT:
            return self.history_dir
        if not is_tenant_id(tenant_id):
            raise ValueError(f"tenant_id: {TENANT_ID_RULE}, got {tenant_id!r}")
        return self.history_dir / "tenants" / tenant_id

    def path(self, session_id: str, tenant_id: str = DEFAULT_TENANT) -> Path:
        return self.tenant_dir(tenant_id) / f"{check_session_id(session_id)}.jsonl"

    def _dir_for_append(self, tenant_id: str) -> str:
        found = self._dirs.get(tenant_id)
        if found is None:
            path = self.tenant_dir(tenant_id)
            path.mkdir(parents=True, exist_ok=True)
            found = self._dirs[tenant_id] = os.fspath(path)
        return found

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
        """Write one event of the tenant's session and return it once its line is with
        the kernel."""
        event, line = encode_event(session_id, type, turn, step, content, role, meta, ts)
        data = (line + "\n").encode("utf-8")
        self._check_open()
        try:
            _write(f"{self._dir_for_append(tenant_id)}/{session_id}.jsonl", data)
        except OSError as error:
            if self.disk is not None and self.disk.noticed(error):
                raise StorageFull() from error
            raise
        return event

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the event log is closed")

    async def read(
        self, session_id: str, *, after_line: int = 0, tenant_id: str = DEFAULT_TENANT
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Yield the session's events in order, skipping the first ``after_line`` lines.

        The read is a snapshot of the file as it was when the read started; a torn last
        line (a crash mid-write) is skipped; a missing file yields nothing. To page, pass
        ``after_line`` plus the number of events received as the next ``after_line``.
        Validation happens at the first iteration, as with any async generator.
        """
        path = self.path(session_id, tenant_id)
        check_after_line(after_line)
        cursor = _ReadCursor(path, skip=after_line)
        while True:
            events = await asyncio.to_thread(cursor.next_chunk)
            if events is None:
                return
            for event in events:
                yield event

    async def last(
        self, session_id: str, *, tenant_id: str = DEFAULT_TENANT
    ) -> dict[str, Any] | None:
        """The session's last whole event; None when it has none. Read on the event
        loop's thread, as an append writes: a few system calls at the file's end."""
        line = _last_line(self.path(session_id, tenant_id))
        return None if line is None else json.loads(line)

    async def delete(self, session_id: str, *, tenant_id: str = DEFAULT_TENANT) -> bool:
        """Remove the tenant's session's file; True if there was one. An append after this
        starts a new file."""
        path = self.path(session_id, tenant_id)
        self._check_open()
        return _unlink(path)

    async def aclose(self) -> None:
        """Refuse new appends and deletes (every earlier one is already written)."""
        self._closed = True


def _write(path: str, data: bytes) -> None:
    """Append ``data`` (whole lines) to ``path``: all of it, or on error none of it."""
    fd = os.open(path, _OPEN_FLAGS, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            size = _cut_torn_tail(fd, size)
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view) :]
        except BaseException:
            # ENOSPC and the like: do not leave part of a line behind a failed append.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def _cut_torn_tail(fd: int, size: int) -> int:
    """Truncate the file after its last newline (a crash tore the last line); return
    the new size."""
    end = size
    while end > 0:
        start = max(0, end - 64 * 1024)
        chunk = os.pread(fd, end - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            end = start + newline + 1
            break
        end = start
    os.ftruncate(fd, end)
    return end


def _last_line(path: Path) -> bytes | None:
    """The file's last whole line without its newline (a torn tail is not one), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        want = 4096
        while True:
            start = max(0, size - want)
            data = os.pread(fd, size - start, start)
            stop = data.rfind(b"\n")
            if stop >= 0:
                begin = data.rfind(b"\n", 0, stop) + 1
                if begin > 0 or start == 0:
                    return data[begin:stop]
            elif start == 0:
                return None
            want *= 2  # the line began before this chunk
    finally:
        os.close(fd)


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


class _ReadCursor:
    """Reads a snapshot of one event file in chunks, one thread hop per chunk."""

    def __init__(self, path: Path, skip: int) -> None:
        self.path = path
        self.skip = skip
        self.offset = 0
        self.line = 0  # whole lines consumed so far
        self.end: int | None = None  # the file size when the read started

    def next_chunk(self) -> list[dict[str, Any]] | None:
        try:
            with open(self.path, "rb") as file:
                if self.end is None:
                    self.end = os.fstat(file.fileno()).st_size
                want = _READ_CHUNK
                while True:
                    length = min(want, self.end - self.offset)
                    if length <= 0:
                        return None
                    file.seek(self.offset)
                    data = file.read(length)
                    last = data.rfind(b"\n")
                    if last >= 0:
                        break
                    if len(data) < want:  # a torn last line, or the file shrank
                        return None
                    want *= 2  # one line longer than the chunk
        except FileNotFoundError:  # never written, or deleted under the read
            return None
        self.offset += last + 1
        lines = data[: last + 1].split(b"\n")[:-1]  # bytes: U+2028 is not a line break
        first = self.line
        self.line += len(lines)
        if self.skip >= len(lines):
            self.skip -= len(lines)
            return []
        events = []
        for number, raw in enumerate(lines[self.skip :], start=first + self.skip + 1):
            try:
                event = json.loads(raw)
            except ValueError as exc:
                raise ValueError(f"{self.path}: line {number} is not a JSON event") from exc
            if not isinstance(event, dict):
                raise ValueError(f"{self.path}: line {number} is not a JSON object")
            events.append(event)
        self.skip = 0
        return events

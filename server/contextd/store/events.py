"""The event log: one JSONL file per session, history_dir/<session_id>.jsonl.

Every line is one event in the format of seed 003 (keys in this order, a None field
left out): ts, session_id, turn, step, type, content, role, meta.

Writes go through one writer thread per EventLog. ``append`` encodes its line on the
event loop and puts it on the thread's queue before its first await, so a session's
lines land in the order ``append`` was called and, written by one thread, never
interleave: the queue is the per-session lock. The thread takes everything queued,
writes each session's lines with one ``os.write``, and settles all those appends with
one callback into the event loop: two thread switches per batch, however many events
and sessions are in it. (Measured against a per-session flusher task making one
``asyncio.to_thread`` call per session batch: 2.3 times the events/s for a turn's
sequential appends, 1.4 times with 50 appenders on one session, 3.7 times with 50
sessions at once.) The price: one slow write (a stalled disk) holds up every
session's appends behind it. A delete goes through the same queue, in its
place among the appends.

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
import json
import os
import queue
import re
import threading
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

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

_STOP = "stop"  # not a valid session id, so never one an append passes in
# (session_id, line or None for a delete, the future its caller awaits)
_Op = tuple[str, bytes | None, "asyncio.Future[bool]"]
# (future, result, error)
_Settled = tuple["asyncio.Future[bool]", bool | None, BaseException | None]

_SESSION_ID = re.compile(r"[0-9a-f]{32}")
_READ_CHUNK = 256 * 1024
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


def event_tokens(prompt: int | None, completion: int | None) -> dict[str, int]:
    """``meta.tokens``: the counts given, with ``total`` only when both are known."""
    tokens: dict[str, int] = {}
    if prompt is not None:
        tokens["prompt"] = prompt
    if completion is not None:
        tokens["completion"] = completion
    if prompt is not None and completion is not None:
        tokens["total"] = prompt + completion
    return tokens


def format_ts(ts: float) -> str:
    """Epoch seconds as ISO 8601 UTC with milliseconds: 2024-05-10T12:00:00.123Z."""
    seconds, millis = divmod(round(ts * 1000), 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


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


class EventLog:
    def __init__(self, history_dir: Path) -> None:
        self.history_dir = history_dir
        history_dir.mkdir(parents=True, exist_ok=True)
        self._queue: queue.SimpleQueue[_Op] = queue.SimpleQueue()
        self._closed = False
        self._stopped: asyncio.Future[bool] | None = None
        # A daemon: an EventLog never closed must not hang the interpreter's exit, and
        # what a daemon can lose at exit was never acknowledged.
        self._thread = threading.Thread(
            target=_writer, args=(history_dir, self._queue), name="contextd-events", daemon=True
        )
        self._thread.start()

    def path(self, session_id: str) -> Path:
        return self.history_dir / f"{check_session_id(session_id)}.jsonl"

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
    ) -> dict[str, Any]:
        """Write one event and return it once its line is with the kernel.

        Cancelling the call does not withdraw the event: it is queued before the first
        await and is written in its place all the same.
        """
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
        # allow_nan=False: NaN/Infinity are not JSON and a strict reader would reject them.
        line = json.dumps(event, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        data = (line + "\n").encode("utf-8")

        await self._submit(session_id, data)
        return event

    def _submit(self, session_id: str, data: bytes | None) -> asyncio.Future[bool]:
        """Queue a write (or with data None a delete) behind everything queued before.

        A caller cancelled while it waits cancels only its wait: the operation is queued
        and happens in its place all the same.
        """
        if self._closed:
            raise RuntimeError("the event log is closed")
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._queue.put((session_id, data, done))
        return done

    async def read(
        self, session_id: str, *, after_line: int = 0
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Yield the session's events in order, skipping the first ``after_line`` lines.

        The read is a snapshot of the file as it was when the read started; a torn last
        line (a crash mid-write) is skipped; a missing file yields nothing. To page, pass
        ``after_line`` plus the number of events received as the next ``after_line``.
        Validation happens at the first iteration, as with any async generator.
        """
        path = self.path(session_id)
        if isinstance(after_line, bool) or not isinstance(after_line, int) or after_line < 0:
            raise ValueError(f"after_line must be an integer >= 0, got {after_line!r}")
        cursor = _ReadCursor(path, skip=after_line)
        while True:
            events = await asyncio.to_thread(cursor.next_chunk)
            if events is None:
                return
            for event in events:
                yield event

    async def delete(self, session_id: str) -> bool:
        """Remove the session's file, after the events appended before this call are
        written; True if there was a file. An append after this starts a new file."""
        check_session_id(session_id)
        return await self._submit(session_id, None)

    async def aclose(self) -> None:
        """Refuse new appends and deletes, and wait until every queued one is done."""
        if self._stopped is None:
            self._stopped = self._submit(_STOP, None)
            self._closed = True
        await asyncio.shield(self._stopped)
        await asyncio.to_thread(self._thread.join)


def _writer(history_dir: Path, ops: queue.SimpleQueue[_Op]) -> None:
    """The writer thread: take every queued operation, do them, settle them, repeat."""
    while True:
        batch = [ops.get()]
        with contextlib.suppress(queue.Empty):
            while True:
                batch.append(ops.get_nowait())
        try:
            settled = _apply(history_dir, batch)
        except BaseException as exc:  # a bug here must not leave appends waiting forever
            settled = [(done, None, exc) for _, _, done in batch]
        by_loop: dict[asyncio.AbstractEventLoop, list[_Settled]] = {}
        for item in settled:
            by_loop.setdefault(item[0].get_loop(), []).append(item)
        for loop, items in by_loop.items():
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(_settle, items)
        if any(session_id == _STOP for session_id, _, _ in batch):
            return


def _apply(history_dir: Path, batch: list[_Op]) -> list[_Settled]:
    """Do a batch in order: each session's consecutive lines in one write, a delete
    after the lines queued before it."""
    settled: list[_Settled] = []
    lines: dict[str, list[tuple[bytes, asyncio.Future[bool]]]] = {}

    def flush(session_id: str) -> None:
        queued = lines.pop(session_id, None)
        if not queued:
            return
        path = history_dir / f"{session_id}.jsonl"
        try:
            _write(path, b"".join(data for data, _ in queued))
        except Exception as exc:
            settled.extend((done, None, exc) for _, done in queued)
        else:
            settled.extend((done, True, None) for _, done in queued)

    for session_id, data, done in batch:
        if session_id == _STOP:
            for other in list(lines):
                flush(other)
            settled.append((done, True, None))
        elif data is not None:
            lines.setdefault(session_id, []).append((data, done))
        else:
            flush(session_id)
            try:
                settled.append((done, _unlink(history_dir / f"{session_id}.jsonl"), None))
            except Exception as exc:
                settled.append((done, None, exc))
    for session_id in list(lines):
        flush(session_id)
    return settled


def _settle(items: list[_Settled]) -> None:
    """In the event loop: resolve a batch's futures (a cancelled waiter's is done)."""
    for done, result, error in items:
        if done.done():
            continue
        if error is None:
            done.set_result(bool(result))
        else:
            done.set_exception(error)


def _write(path: Path, data: bytes) -> None:
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
            # ENOSPC and the like: do not leave part of the batch behind its failed appends.
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

"""SQLite's event log: one JSONL file per session, history_dir/<session_id>.jsonl for the
default tenant's sessions and history_dir/tenants/<name>/<session_id>.jsonl for another
tenant's, where <name> is ``tenant_dir_name`` of the tenant id (tenant ids are plain
names, core/identity.py, checked again here; the names stay apart where the filesystem
ignores case); each line an event as store/event_log/events.py encodes it.

``append`` encodes its line and writes it with one ``os.write`` on the event loop's
thread, before it returns: in one process a session's lines land in the order ``append``
was called and never interleave, with no queue. An append is a few system calls (open,
flock, fstat, a one-byte pread, write, close); a hand-off to a writer thread and back
cost more than that in CPU alone (bench/README.md, "Measured costs behind the code"), and
its Python code competed with the event loop for the GIL. The price: a stalled disk
stalls the event loop.

Several processes may append to one file: the workers of one server, where a turn's
final and turn_end lines are written after its session's lease is given back, while the
session's next turn or its end may be written by another worker. Each append therefore
holds an exclusive ``flock`` on the file from before it looks at the file's end until its
write succeeded or was undone: a torn tail it cuts is never another writer's line in
progress, and undoing its own failed write never cuts a line another process appended
meanwhile. The kernel drops the lock with the file's descriptor, also when the process
dies; an uncontended lock costs one system call (bench/store_writes.py).

A line is handed to the kernel (a raw fd, no user-space buffer) before its
``append`` returns: an appended event survives a crash of the process (SIGKILL
included) but not a power cut or a kernel crash, since nothing calls fsync.

A crash in the middle of a write can leave a torn last line (no trailing newline).
Readers skip it; the next write to that file first cuts it off, so the file stays a
sequence of whole lines and line numbers (``read(after_line=...)``) stay stable. A reader
takes the lock shared to find where the file ends, so it never counts a line of an
append that fails and is undone (two lines written together, the first whole).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from contextd.core.errors import StorageFull
from contextd.core.identity import DEFAULT_TENANT, check_tenant_id, is_tenant_id, tenant_dir_name
from contextd.store.engine.database import Connection
from contextd.store.engine.disk import DiskWatch
from contextd.store.engine.private import FILE_MODE, make_dir
from contextd.store.models import check_session_id

_READ_CHUNK = 256 * 1024
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
# A log's files are created private (FILE_MODE, 0600), as every file of the data directory.


def tenant_dir(history_dir: Path, tenant_id: str) -> Path:
    """Where the tenant's files are: history_dir itself for the default tenant."""
    if tenant_id == DEFAULT_TENANT:
        return history_dir
    check_tenant_id(tenant_id)
    return history_dir / "tenants" / tenant_dir_name(tenant_id)


def rename_tenant_dirs(history_dir: Path) -> None:
    """Move the directories of tenants with capitals to their names of now: they were
    named by the tenant id itself, which two tenants could share where case is ignored.
    Done at start, before any log is read or written; a name already taken is left."""
    tenants = history_dir / "tenants"
    if not tenants.is_dir():
        return
    for entry in sorted(tenants.iterdir()):
        name = entry.name
        if entry.is_dir() and is_tenant_id(name) and tenant_dir_name(name) != name:
            target = tenants / tenant_dir_name(name)
            if not target.exists():
                entry.rename(target)


def log_path(history_dir: Path, tenant_id: str, session_id: str) -> Path:
    return tenant_dir(history_dir, tenant_id) / f"{check_session_id(session_id)}.jsonl"


class FileLog:
    """The sessions' logs as files (``SessionLogs`` of store/event_log/events.py)."""

    def __init__(self, history_dir: Path, disk: DiskWatch | None = None) -> None:
        self.history_dir = history_dir
        make_dir(history_dir)
        rename_tenant_dirs(history_dir)
        # Told of an append that failed for want of space (the database's).
        self.disk = disk
        # Joined as text: cheaper than a Path per event. Tenant -> its directory, made
        # on its first append.
        self._dirs = {DEFAULT_TENANT: os.fspath(history_dir)}

    def path(self, session_id: str, tenant_id: str = DEFAULT_TENANT) -> Path:
        return log_path(self.history_dir, tenant_id, session_id)

    def _dir_for_append(self, tenant_id: str) -> str:
        found = self._dirs.get(tenant_id)
        if found is None:
            path = tenant_dir(self.history_dir, tenant_id)
            make_dir(path)
            found = self._dirs[tenant_id] = os.fspath(path)
        return found

    async def write(self, session_id: str, tenant_id: str, lines: list[str]) -> None:
        """The lines at the end of the session's file, in one write (returned once with
        the kernel). The session id comes checked, with the events (EventStore)."""
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        try:
            _write(f"{self._dir_for_append(tenant_id)}/{session_id}.jsonl", data)
        except OSError as error:
            if self.disk is not None and self.disk.noticed(error):
                raise StorageFull() from error
            raise

    def joined(self, session_id: str, tenant_id: str, lines: list[str]) -> None:
        """Files join no database write: the lines are appended after it."""
        return None

    async def read(
        self, session_id: str, after_line: int, tenant_id: str
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Yield the session's events in order, skipping the first ``after_line`` lines.

        The read is a snapshot of the file as it was when the read started; a torn last
        line (a crash mid-write) is skipped; a missing file yields nothing. The ids are
        checked at the first iteration, as with any async generator.
        """
        path = self.path(session_id, tenant_id)
        cursor = _ReadCursor(path, skip=after_line)
        while True:
            events = await asyncio.to_thread(cursor.next_chunk)
            if events is None:
                return
            for event in events:
                yield event

    async def last(self, session_id: str, tenant_id: str) -> dict[str, Any] | None:
        """The session's last whole event; None when it has none. Read on the event
        loop's thread, as an append writes: a few system calls at the file's end."""
        line = _last_line(self.path(session_id, tenant_id))
        return None if line is None else json.loads(line)

    async def delete(self, session_id: str, tenant_id: str) -> bool:
        """Remove the tenant's session's file; True if there was one. An append after this
        starts a new file."""
        return _unlink(self.path(session_id, tenant_id))

    async def deleted_with_sessions(
        self, conn: Connection, session_ids: Sequence[str]
    ) -> int | None:
        """None: files outlive the rows, removed after the commit (removals.py)."""
        return None


def _write(path: str, data: bytes) -> None:
    """Append ``data`` (whole lines) to ``path``: all of it, or on error none of it.
    Under the file's lock, which the close gives back."""
    fd = os.open(path, _OPEN_FLAGS, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            size = _cut_torn_tail(fd, size)
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view) :]
        except BaseException:
            # ENOSPC and the like: do not leave part of a line behind a failed append
            # (under the lock the file's end is still this write's).
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
        fcntl.flock(fd, fcntl.LOCK_SH)  # not the middle of an append that may be undone
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


def _whole_end(fd: int) -> int:
    """The file's size between appends: never in the middle of one that may be undone."""
    fcntl.flock(fd, fcntl.LOCK_SH)
    try:
        return os.fstat(fd).st_size
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)  # the chunks are read without holding appends up


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
                    self.end = _whole_end(file.fileno())
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


class FileLines:
    """The event log files as lines of text (store/event_log/events.py, EventLines), for
    ``contextd store copy``; reading them makes no directory."""

    def __init__(self, history_dir: Path) -> None:
        self._dir = history_dir

    def _path(self, tenant_id: str, session_id: str) -> Path:
        return log_path(self._dir, tenant_id, session_id)

    async def batches(self, tenant_id: str, session_id: str) -> AsyncIterator[list[str]]:
        for lines in _file_batches(self._path(tenant_id, session_id)):
            yield lines

    async def count(self, tenant_id: str, session_id: str) -> int:
        return _count_lines(self._path(tenant_id, session_id))

    async def write(
        self, tenant_id: str, session_id: str, batches: AsyncIterator[list[str]]
    ) -> int:
        path = self._path(tenant_id, session_id)
        written = 0
        # Replaces what holds no whole line (nothing, or a torn line).
        with _create(path) as file:
            async for lines in batches:
                file.write("".join(line + "\n" for line in lines).encode("utf-8"))
                written += len(lines)
        if not written:
            path.unlink()
        return written


# Sync file helpers: the copy is a command of its own, with no other work on its loop.
def _file_batches(path: Path) -> Iterator[list[str]]:
    """The file's whole lines, a chunk at a time (none for a missing file)."""
    try:
        file = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return
    with file:
        rest = b""
        while chunk := file.read(_READ_CHUNK):
            *lines, rest = (rest + chunk).split(b"\n")
            if lines:
                yield [line.decode("utf-8") for line in lines]


def _count_lines(path: Path) -> int:
    lines = 0
    try:
        with open(path, "rb") as file:
            while chunk := file.read(_READ_CHUNK):
                lines += chunk.count(b"\n")
    except FileNotFoundError:
        return 0
    return lines


def _create(path: Path) -> BinaryIO:
    make_dir(path.parent)
    return open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE), "wb")

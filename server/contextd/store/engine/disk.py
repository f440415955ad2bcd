"""The data directory's disk: a write refused for want of space is told apart from other
failures, and the store watches the disk until it has room again.

The database is given its watch when opened (store/open.py). The first write that
fails for want of space marks the disk full and tells the listeners (the server turns
its health to NOT_SERVING); from then on a small probe
write runs every ``interval`` seconds, and the first that succeeds marks the disk as
having room again (health SERVING). A failed write loses nothing: SQLite rolls its
transaction back and an event log append is cut back to its last whole line.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
PROBE_BYTES = 256 * 1024  # room for a few requests' writes, not just one byte


def is_disk_full(error: BaseException) -> bool:
    if isinstance(error, sqlite3.Error):
        return getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
    return isinstance(error, OSError) and error.errno in _NO_SPACE


class DiskWatch:
    def __init__(self, directory: Path, interval: float = 1.0) -> None:
        self.directory = directory
        self.interval = interval
        self.full = False
        # Called with True when the disk has room again, False when it is full.
        self.listeners: list[Callable[[bool], None]] = []
        self._probe: asyncio.Task[None] | None = None

    def noticed(self, error: BaseException) -> bool:
        """Whether ``error`` is the disk being full (then watched until it has room)."""
        if not is_disk_full(error):
            return False
        if not self.full:
            self.full = True
            self._tell(False)
            self._probe = asyncio.get_running_loop().create_task(self._wait_for_room())
        return True

    async def aclose(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe

    async def _wait_for_room(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            if await asyncio.to_thread(has_room, self.directory):
                break
        self.full = False
        self._tell(True)

    def _tell(self, has_room: bool) -> None:
        for listener in self.listeners:
            listener(has_room)


def has_room(directory: Path) -> bool:
    """Whether ``PROBE_BYTES`` can be written (and synced) in ``directory``."""
    path = directory / f".room-{uuid.uuid4().hex}"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"\0" * PROBE_BYTES)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
    return True

"""The write lock the workers of one server take in turn before SQLite's own.

SQLite never waits for its write lock: a writer that finds it taken tries again after a
pause, and with two workers writing turns those pauses left each worker idle a third of
the time. An ``flock`` on a file beside the database is a queue the kernel keeps: a
worker that finds it taken blocks in a thread of its own and is woken the moment the
holder lets go, while its event loop serves other calls.

The uncontended path is one non-blocking ``flock``, with no thread. Waits go to one
daemon thread (it must not hold up the process's exit). A wait that gives up (the busy
timeout) stays queued there; its lock is taken on a descriptor of its own, so when it is
granted later it is let go at once and never confused with a lock taken since.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import queue
import threading
from concurrent.futures import Future
from pathlib import Path

from contextd.store.engine.private import open_private

_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC


class WriteLockTimeout(TimeoutError):
    """Another worker held the write lock longer than the wait allowed."""


class _Wait:
    """One blocking attempt, on its own descriptor."""

    def __init__(self, path: Path) -> None:
        self.fd = open_private(path, _FLAGS)
        self.granted: Future[None] = Future()
        self._guard = threading.Lock()
        self._abandoned = False

    def block(self) -> None:
        """In the waiting thread: until the lock is granted; let go at once if the
        waiter gave up meanwhile."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError as error:
            os.close(self.fd)
            self.granted.set_exception(error)
            return
        with self._guard:
            if self._abandoned:
                os.close(self.fd)
            else:
                self.granted.set_result(None)

    def abandon(self) -> None:
        with self._guard:
            self._abandoned = True
            if self.granted.done() and self.granted.exception() is None:
                os.close(self.fd)


class WriteLock:
    """A lock file shared by the processes writing one SQLite database. One holder per
    process at a time: callers serialise among themselves (the database's asyncio lock)."""

    def __init__(self, path: Path, longest_wait: float) -> None:
        self.path = path
        self._longest_wait = longest_wait
        self._fd = open_private(path, _FLAGS)
        self._held: int | None = None
        self._waits: queue.SimpleQueue[_Wait | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    async def acquire(self) -> None:
        """Hold the lock; WriteLockTimeout after the longest wait."""
        assert self._held is None, "the write lock is held by this process already"
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            self._held = self._fd
            return
        wait = _Wait(self.path)
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._serve_waits, name="contextd-write-lock", daemon=True
            )
            self._thread.start()
        self._waits.put(wait)
        try:
            granted = asyncio.shield(asyncio.wrap_future(wait.granted))
            await asyncio.wait_for(granted, self._longest_wait)
        except TimeoutError:
            wait.abandon()
            held = f"another worker held the write lock {self._longest_wait:g} s"
            raise WriteLockTimeout(f"{self.path}: {held}") from None
        except BaseException:
            wait.abandon()
            raise
        self._held = wait.fd

    def release(self) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        if held == self._fd:
            fcntl.flock(held, fcntl.LOCK_UN)
        else:
            os.close(held)  # a waiting descriptor: closing it lets the lock go

    def close(self) -> None:
        self.release()
        os.close(self._fd)
        self._waits.put(None)

    def _serve_waits(self) -> None:
        while (wait := self._waits.get()) is not None:
            wait.block()

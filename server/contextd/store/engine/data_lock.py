"""One server per data directory, enforced.

The store keeps what it wrote in memory (a session's newest messages, summaries, the
catalog) and trusts it because this process is the database's only writer. A second
server on the same directory would break that silently, so ``serve`` takes an
exclusive ``flock`` on ``<data dir>/contextd.lock`` first and a second one refuses to
start. The kernel drops the lock when the process ends, however it ends, so a
restart after a crash (or SIGKILL) is never blocked by a stale lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILENAME = "contextd.lock"


class DataDirInUse(RuntimeError):
    pass


class DataDirLock:
    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, data_dir: Path) -> DataDirLock:
        path = data_dir / LOCK_FILENAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise DataDirInUse(
                f"another contextd (pid {holder}) is serving the data directory {data_dir}; "
                "stop it or give this one another --data-dir"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        # The holder's pid, for the message above and for whoever looks at the file.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

"""Whether the database server answers (PostgreSQL; SQLite is a file of this process).

The first call that finds the database out of reach (refused or dropped connection, a
server shutting down or starting up) marks it unreachable and tells the listeners (the
server turns its health to NOT_SERVING); from then on a probe (``SELECT 1``) runs every
``interval`` seconds, and the first that answers marks it reachable again (health
SERVING). Calls are not held back meanwhile: each one tries the database itself, so
the first call after the database returns succeeds even before the probe notices.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable


class DatabaseWatch:
    def __init__(self, probe: Callable[[], Awaitable[object]], interval: float = 1.0) -> None:
        # Raises while the database does not answer.
        self._probe = probe
        self.interval = interval
        self.unreachable = False
        # Called with True when the database answers again, False when it stopped.
        self.listeners: list[Callable[[bool], None]] = []
        self._probing: asyncio.Task[None] | None = None

    def lost(self) -> None:
        """A call found the database out of reach: watch it until it answers."""
        if self.unreachable:
            return
        self.unreachable = True
        self._tell(False)
        self._probing = asyncio.get_running_loop().create_task(self._wait_for_answer())

    async def aclose(self) -> None:
        if self._probing is not None:
            self._probing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probing

    async def _wait_for_answer(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self._probe()
            except Exception:  # any failure: it does not answer yet
                continue
            break
        self.unreachable = False
        self._tell(True)

    def _tell(self, reachable: bool) -> None:
        for listener in self.listeners:
            listener(reachable)

"""Large counting work off the event loop's thread.

Counting tokens is the one piece of a request whose cost grows with its text: megabytes
of text take a second or more, and on the loop's thread that second would hold every
other call, health checks included. Requests over ``LARGE_CHARS`` are counted on a
worker thread instead (tiktoken releases the GIL while it encodes), a bounded number at
once so that large requests queue rather than take every core from the loop; smaller
ones stay on the loop's thread, where a thread hop would cost more than the work.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import ParamSpec, TypeVar

# About 10 ms of counting: below it the loop may as well do the work itself.
LARGE_CHARS = 100_000

P = ParamSpec("P")
R = TypeVar("R")


class Offload:
    def __init__(self, workers: int | None = None) -> None:
        # One core left to the event loop.
        self.workers = workers or max(1, (os.cpu_count() or 2) - 1)
        self._slots = asyncio.Semaphore(self.workers)

    async def run(self, work: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """``work(*args, **kwargs)`` on a worker thread, once a slot is free."""
        async with self._slots:
            return await asyncio.to_thread(work, *args, **kwargs)

    async def run_if(
        self, chars: int, work: Callable[P, R], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """``work`` on a worker for ``chars`` of text over ``LARGE_CHARS``, else here."""
        if chars < LARGE_CHARS:
            return work(*args, **kwargs)
        return await self.run(work, *args, **kwargs)

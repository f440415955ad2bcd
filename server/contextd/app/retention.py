"""The retention task, at start and then every ``PASS_INTERVAL`` seconds, in the
background: memories whose expiry passed are deleted (reads leave them out from that
moment on already), and with ``--retention-days``, sessions without activity for that
long, with their messages, summaries and event logs.

A session's purge leaves the user's memories: they belong to the user, not to a session.
A pass reads the sessions a chunk of rows at a time and deletes them (and expired
memories) a batch at a time, yielding to the event loop in between, so calls keep being
served while it runs. A session with a chat turn or after-turn work in progress is left
for a later pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable

from contextd.store.event_log.removals import LogRemovals
from contextd.store.memory.repository import MemoryRepo
from contextd.store.retention import Purged, SessionPurge

log = logging.getLogger("contextd.retention")

PASS_INTERVAL = 3600.0  # seconds between two passes
SCAN_ROWS = 2000  # sessions read per step
DELETE_BATCH = 100  # sessions deleted per transaction
DAY = 86400.0


def check_days(days: float) -> float:
    """``days`` as given, if it is 0 (keep forever) or a positive number."""
    if not (math.isfinite(days) and days >= 0):
        raise ValueError("--retention-days must be 0 (keep forever) or a positive number of days")
    return days


class RetentionPurger:
    def __init__(
        self,
        purge: SessionPurge,
        removals: LogRemovals,
        days: float,
        busy: Callable[[str], bool],
        clock: Callable[[], float] = time.time,
        memories: MemoryRepo | None = None,
    ) -> None:
        self.purge = purge
        self.removals = removals
        self.days = check_days(days)
        self.busy = busy
        self.clock = clock
        self.memories = memories
        self._task: asyncio.Task[None] | None = None

    async def run_once(self) -> Purged:
        """One pass: purge what expired, and what has been inactive for ``days`` (when
        not 0); logs one line when it deleted anything."""
        total = Purged()
        if self.memories is not None:
            total += Purged(memories=await self._expired_memories(self.memories))
        if self.days > 0:
            total += await self._inactive_sessions()
        if total.sessions or total.memories:
            log.info(
                "retention purge",
                extra={
                    "days": self.days,
                    "sessions": total.sessions,
                    "messages": total.messages,
                    "summaries": total.summaries,
                    "event_logs": total.event_logs,
                    "memories": total.memories,
                },
            )
        return total

    async def _expired_memories(self, memories: MemoryRepo) -> int:
        deleted = 0
        while gone := await memories.purge_expired(self.clock(), DELETE_BATCH):
            deleted += gone
            await asyncio.sleep(0)  # calls waiting on the loop go first
        return deleted

    async def _inactive_sessions(self) -> Purged:
        await self.removals.sweep()  # what a deletion cut short by a crash left behind
        cutoff = self.clock() - self.days * DAY
        total = Purged()
        after = 0
        while True:
            ids, after = await self.purge.inactive(cutoff, after, SCAN_ROWS)
            for start in range(0, len(ids), DELETE_BATCH):
                batch = ids[start : start + DELETE_BATCH]
                total += await self.purge.delete(batch, cutoff, self.busy)
                await asyncio.sleep(0)  # calls waiting on the loop go first
            if not after:
                break
            await asyncio.sleep(0)
        return total

    def start(self) -> None:
        """Run a pass now and then every ``PASS_INTERVAL`` seconds, in the background."""
        self._task = asyncio.get_running_loop().create_task(self._passes(), name="retention")

    async def _passes(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:  # the next pass tries again
                log.exception("retention purge failed")
            await asyncio.sleep(PASS_INTERVAL)

    async def aclose(self) -> None:
        """Stop the passes; a pass cut short rolls its transaction back."""
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

"""Saving the text a model step streams, so that a killed server keeps most of it; where
processes share the database, renewing the session's lease the row is."""

from __future__ import annotations

import asyncio
import logging
import time

from contextd.app.chat.turn import Turn
from contextd.store.models import UsageTotals
from contextd.store.partial_answers import PartialAnswerRepo

log = logging.getLogger("contextd.chat")

# At most one write a second per turn: a killed server loses at most the text of the
# last second.
SAVE_INTERVAL = 1.0
# Renewals (or saves) per lease period: enough that a late one or two still keep the
# lease, few enough that waiting turns (tools, a slow model) cost the database little.
RENEWALS_PER_LEASE = 4


class PartialAnswerWriter:
    """Saves a turn's streaming step text to its partial_answers row once a second,
    from a timer, so that the stream's deltas pay nothing for it. Where other processes
    share the database, a tick with no new text renews the row's lease instead (a save
    renews it too), once a quarter of the lease passed since the row's last write. A
    write runs as a task of its own and never holds the stream up: one at a time (a tick
    while one runs is skipped), and one that fails is logged and the turn goes on."""

    __slots__ = ("_lease_lost", "_renewed_at", "_repo", "_saved", "_task", "_timer", "_turn")

    def __init__(self, repo: PartialAnswerRepo, turn: Turn) -> None:
        self._repo = repo
        self._turn = turn
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._saved = (0, 0)  # (step, characters of its text) in the row
        self._lease_lost = False  # a renewal found the row another process's
        # time.monotonic() of the row's last write (its opening, a save, a renewal).
        self._renewed_at = time.monotonic()

    def start(self) -> None:
        """A model step starts streaming: its first write comes a second later."""
        self.stop()
        self._timer = asyncio.get_running_loop().call_later(SAVE_INTERVAL, self._tick)

    def stop(self) -> None:
        """The step's stream ended: no more writes are started."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def settle(self) -> None:
        """No more writes, and the one running has finished: the turn's next write to the
        row (storing its text as a message) comes after it. A cancel of the caller leaves
        the write to finish."""
        self.stop()
        if self._task is not None:
            await asyncio.wait((self._task,))

    def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(SAVE_INTERVAL, self._tick)
        if self._task is not None:
            return
        turn = self._turn
        text = turn.step_text
        if (turn.step, len(text)) == self._saved or not text:
            due = self._renewed_at + self._repo.lease_seconds / RENEWALS_PER_LEASE
            if self._repo.turns_hold_leases and not self._lease_lost and time.monotonic() >= due:
                self._task = loop.create_task(self._renew())
            return
        self._task = loop.create_task(self._save(turn.step, text, turn.usage.so_far()))

    async def _renew(self) -> None:
        session_id = self._turn.session.id
        try:
            started = time.monotonic()
            if await self._repo.renew(session_id):
                self._renewed_at = started
            else:
                # Renewals came too late (or the session is gone): another process may
                # have closed this turn as interrupted. Said once; the turn goes on.
                self._lease_lost = True
                log.warning("the turn lost its session's lease", extra={"session_id": session_id})
        except Exception as error:
            log.warning(
                "could not renew the session's lease; the turn goes on",
                extra={"session_id": session_id, "error": repr(error)},
            )
        finally:
            self._task = None

    async def _save(self, step: int, text: str, usage: UsageTotals) -> None:
        started = time.monotonic()
        try:
            await self._repo.save(self._turn.session.id, step, text, usage)
        except Exception as error:
            log.warning(
                "could not save the partial answer; the turn goes on",
                extra={"session_id": self._turn.session.id, "error": repr(error)},
            )
        else:
            self._saved = (step, len(text))
            self._renewed_at = started
        finally:
            self._task = None

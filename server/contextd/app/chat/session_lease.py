"""One turn at a time per session, in this process and across the processes that share a
database (``SessionTurns``), and what this process knows of each session's event log.

In one process, a lock per session orders a session's turns. Where other
processes (replicas) run turns on the same database, a turn also holds its session's
partial_answers row as a lease (store/partial_answers.py) from before it numbers itself
until its answer is stored: a turn that finds another process's live row waits for it,
polling with a growing pause, for as long as its call's deadline allows; a row whose
process stopped renewing it is a turn that process's end cut off, closed here as
interrupted (interrupted.py) before the turn goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import AsyncIterator

from contextd.app.chat.interrupted import InterruptedTurns
from contextd.core.errors import SessionBusy
from contextd.store.models import Session
from contextd.store.partial_answers import Busy, Held, PartialAnswerRepo

FIRST_PAUSE_S = 0.05
LONGEST_PAUSE_S = 1.0
# How long a turn waits for another process's turn of its session when its call has no
# deadline.
LONGEST_WAIT_S = 120.0
# Given up this long before the call's deadline, so that the caller hears why.
DEADLINE_MARGIN_S = 0.25
# Sessions known to have an open event log, at most.
_LOGS_OPEN_KEPT = 16384


class SessionTurns:
    """Where a session's turns, and its end, wait for each other. A turn reads the
    history, numbers itself and appends; two at once would share a turn index and
    interleave their messages. Other processes sharing the database are held off by the
    session's lease, taken under the in-process lock."""

    def __init__(self, partials: PartialAnswerRepo, interrupted: InterruptedTurns) -> None:
        self.partials = partials
        self.interrupted = interrupted
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        # Sessions whose event log does not end with session_end, as this process knows
        # from its own turns (a turn never writes session_end; an ending session is
        # forgotten first): their next turn needs no read of the log's last line. Only
        # where no other process writes the logs; emptied when full.
        self._logs_open: set[str] = set()

    @property
    def shared(self) -> bool:
        """Whether other processes run turns on the database: turns hold leases."""
        return self.partials.turns_hold_leases

    def running(self, session_id: str) -> bool:
        """Whether a turn of the session runs or waits for the one before it."""
        lock = self._locks.get(session_id)
        return lock is not None and lock.locked()

    def lock(self, session_id: str) -> asyncio.Lock:
        """The session's lock in this process."""
        lock = self._locks.get(session_id) or asyncio.Lock()
        self._locks[session_id] = lock
        return lock

    async def hold(
        self,
        tenant_id: str,
        session_id: str,
        deadline: float | None,
        user_id: str | None = None,
    ) -> Held:
        """The session's lease, once it is this process's (``hold_session``); only for a
        turn of ``user_id`` when given (else the caller checked the session's user)."""
        return await hold_session(
            self.partials, self.interrupted, tenant_id, session_id, user_id, deadline
        )

    async def release(self, session_id: str) -> None:
        """Give the session's lease back, even when the caller is cancelled."""
        await asyncio.shield(self.partials.release(session_id))

    @contextlib.asynccontextmanager
    async def ending(self, session: Session, deadline: float | None) -> AsyncIterator[None]:
        """Between the session's turns, as its next turn would wait, so that the session's
        end comes after a running turn; its log is no longer known to be open."""
        async with self.lock(session.id):
            if self.shared:
                await self.hold(session.tenant_id, session.id, deadline)
            try:
                self._logs_open.discard(session.id)
                yield
            finally:
                if self.shared:
                    await self.release(session.id)

    def log_open(self, session_id: str) -> None:
        """The session's log now ends with a turn's lines, not with session_end."""
        if self.shared:
            return  # another process may end the session
        if len(self._logs_open) >= _LOGS_OPEN_KEPT:
            self._logs_open.clear()
        self._logs_open.add(session_id)

    def log_known_open(self, session_id: str) -> bool:
        return session_id in self._logs_open

    def log_deleted(self, session_id: str) -> None:
        self._logs_open.discard(session_id)


async def hold_session(
    partials: PartialAnswerRepo,
    interrupted: InterruptedTurns,
    tenant_id: str,
    session_id: str,
    user_id: str | None,
    deadline: float | None,
) -> Held:
    """Wait until the session's lease is this process's; what the claim read with it.
    ``user_id``: the session's user, whose turn it must be (None: not checked).
    ``deadline``: the call's end, in ``time.monotonic()`` seconds
    (None: it has none). Raises SessionBusy when another process's turn holds the session
    until then, SessionNotFound when there is no such session (of ``user_id``)."""
    give_up = time.monotonic() + LONGEST_WAIT_S
    if deadline is not None:
        give_up = min(give_up, deadline - DEADLINE_MARGIN_S)
    pause = FIRST_PAUSE_S
    while True:
        claim = await partials.claim(tenant_id, session_id, user_id)
        if isinstance(claim, Held):
            return claim
        if not isinstance(claim, Busy):
            await interrupted.close(claim)
            continue
        left = give_up - time.monotonic()
        if left <= 0:
            raise SessionBusy(
                f"a turn of session {session_id!r} is running on another server sharing the "
                "database and did not end in time; send the turn again later"
            )
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, LONGEST_PAUSE_S)

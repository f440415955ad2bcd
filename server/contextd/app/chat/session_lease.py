"""One turn at a time per session across the processes that share a database.

In one process, ChatApp's lock per session orders a session's turns. Where other
processes (replicas) run turns on the same database, a turn also holds its session's
partial_answers row as a lease (store/partial_answers.py) from before it numbers itself
until its answer is stored: a turn that finds another process's live row waits for it,
polling with a growing pause, for as long as its call's deadline allows; a row whose
process stopped renewing it is a turn that process's end cut off, closed here as
interrupted (interrupted.py) before the turn goes on.
"""

from __future__ import annotations

import asyncio
import time

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


async def hold_session(
    partials: PartialAnswerRepo,
    interrupted: InterruptedTurns,
    session: Session,
    deadline: float | None,
) -> Held:
    """Wait until the session's lease is this process's; what the claim read with it.
    ``deadline``: the call's end, in ``time.monotonic()`` seconds
    (None: it has none). Raises SessionBusy when another process's turn holds the session
    until then."""
    give_up = time.monotonic() + LONGEST_WAIT_S
    if deadline is not None:
        give_up = min(give_up, deadline - DEADLINE_MARGIN_S)
    pause = FIRST_PAUSE_S
    while True:
        claim = await partials.claim(session.tenant_id, session.id)
        if isinstance(claim, Held):
            return claim
        if not isinstance(claim, Busy):
            await interrupted.close(claim)
            continue
        left = give_up - time.monotonic()
        if left <= 0:
            raise SessionBusy(
                f"a turn of session {session.id!r} is running on another server sharing the "
                "database and did not end in time; send the turn again later"
            )
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, LONGEST_PAUSE_S)

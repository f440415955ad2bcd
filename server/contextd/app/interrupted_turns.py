"""Chat turns the server's end cut off (SIGKILL, a crash, a power cut), closed at the
next start, before the server serves.

A running turn keeps a partial_answers row (store/partial_answers.py) from the moment its
input is stored until its answer is: a row found at start is a turn that never ended. On
a database other processes share, only rows whose lease expired are (another replica's
live turns are not), each taken over first so that one process closes it; the next turn
of such a session closes it too, when it finds it (app/chat/session_lease.py).
Closing one is app/chat/interrupted.py's work.
"""

from __future__ import annotations

import logging

from contextd.app.chat.interrupted import close_turn, turn_ids
from contextd.app.sessions import SessionsApp
from contextd.store.partial_answers import PartialAnswerRepo

log = logging.getLogger("contextd.chat")


async def close_interrupted_turns(partials: PartialAnswerRepo, sessions: SessionsApp) -> int:
    """Close every turn a partial answer was left behind by; how many were closed. One that
    cannot be closed now is logged and left for the next start."""
    closed = 0
    async for left in partials.abandoned():
        try:
            await close_turn(left, partials, sessions)
        except Exception as error:
            log.warning(
                "could not close an interrupted turn; the next start tries again",
                extra={**turn_ids(left), "error": repr(error)},
            )
            continue
        closed += 1
    return closed

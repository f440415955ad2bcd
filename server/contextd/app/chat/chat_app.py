"""StreamChat's use case: one chat turn, from the user's message to the stored answer, in
its phases: the set-up (turn_setup.py: the session, its lease, the input stored), the
step loop (step_loop.py: the model, tools, editing, recall), the recording and the end
(recorder.py: the event log, the partial answer, the usage, the turn's end)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

from contextd.app.chat.events import ChatEvent, TurnStatus
from contextd.app.chat.request import ChatTurnRequest, validate
from contextd.app.chat.session_lease import SessionTurns
from contextd.app.chat.step_loop import StepLoop
from contextd.app.chat.turn_setup import TurnSetup
from contextd.core.errors import SessionNotFound
from contextd.store.event_log.events import EventStore, SessionLog


class ChatApp:
    """StreamChat's turns: each set up by ``setup``, its steps run by ``steps``; a
    session's turns wait for each other at ``turns``. ``events``: where a session deleted
    while its turn ran loses the lines the turn logged after the deletion."""

    def __init__(
        self, setup: TurnSetup, steps: StepLoop, turns: SessionTurns, events: EventStore
    ) -> None:
        self._setup = setup
        self._steps = steps
        self._turns = turns
        self._events = events

    def turn_running(self, session_id: str) -> bool:
        """Whether a turn of the session runs or waits for the one before it."""
        return self._turns.running(session_id)

    async def close_interrupted_turns(self) -> int:
        """Before serving: close the turns a killed server left open (interrupted.py);
        how many were closed."""
        return await self._turns.interrupted.close_left_behind()

    async def run(self, req: ChatTurnRequest) -> AsyncGenerator[ChatEvent, None]:
        """One turn as a stream of events. Errors before TurnStarted raise; later ones
        end the stream with a TurnCompleted whose status says what happened. Turns of
        one session run one after the other: in the order they arrived in this process,
        and not at once with another process's turn of it."""
        validate(req)
        lock: contextlib.AbstractAsyncContextManager[object] = contextlib.nullcontext()
        if req.session_id:
            lock = self._turns.lock(req.session_id)
        # Every text delta passes each generator between the provider and the caller:
        # this one iterates the steps itself, and the steps the provider's stream.
        async with lock:
            started, tools, request = await self._setup.start(req)
            record = tools.record
            try:
                yield started
                # aclosing: closed here (a GeneratorExit at the yield), the steps and the
                # provider's stream close before the partial answer is stored.
                steps = self._steps.run(tools, request)
                async with contextlib.aclosing(steps):
                    async for event in steps:
                        yield event
            except SessionNotFound:
                # Deleted while the turn ran: nothing more is stored, and the events the
                # turn logged after the deletion must not leave a log behind it.
                self._turns.log_deleted(tools.turn.session.id)
                await asyncio.shield(SessionLog(self._events, tools.turn.session).delete())
                raise
            except BaseException as error:
                # A client cancel, a passed deadline or a bug: keep what was said, go on.
                cancelled = isinstance(error, asyncio.CancelledError | GeneratorExit)
                status = TurnStatus.CANCELLED if cancelled else TurnStatus.ERROR
                reason = (
                    "the call was cancelled or its deadline passed" if cancelled else repr(error)
                )
                if not record.end.completed:  # a close at the last event leaves nothing to store
                    await asyncio.shield(record.store_partial(status, reason))
                raise

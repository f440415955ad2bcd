"""A turn's end, once its answer and usage are stored: its last line in the event log,
the turn counted, an ok turn handed to the work after the turn, and what the caller is
told of it."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field

from contextd.app.after_turn import AfterTurnRunner, FinishedTurn
from contextd.app.chat.event_log import TurnLog
from contextd.app.chat.events import TurnCompleted, TurnStatus
from contextd.app.chat.turn import Turn
from contextd.core.editing.compaction import NO_OPTIONS, CompactionOptions
from contextd.core.messages import ToolCall
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.store.event_log.events import LogLines
from contextd.store.models import StoredMessage


@dataclass(frozen=True, slots=True)
class Ending:
    """How a turn ends, decided before its answer is stored: its end's log lines go with
    the answer where the log can join that write."""

    status: TurnStatus
    error: str
    duration_ms: int
    lines: LogLines


@dataclass(slots=True)
class TurnEnd:
    """Ends one turn (``complete``), once."""

    turn: Turn
    log: TurnLog
    after_turn: AfterTurnRunner | None = None
    metrics: Recorder = NULL_RECORDER
    _: KW_ONLY
    # For the session's compaction after the turn.
    token_budget: int = 0
    compaction: CompactionOptions = NO_OPTIONS
    # Its TurnCompleted is made: nothing is left to store.
    completed: bool = field(default=False, init=False)

    def ending(
        self,
        status: TurnStatus,
        *,
        error: str = "",
        final: tuple[int, str] | None = None,
        join: bool = True,
    ) -> Ending:
        """The turn's end as it is now, its lines to be written with its answer
        (``join``) or once it is stored (``final``: the answer's step and text, logged
        as its ``final`` line, when it answered)."""
        turn = self.turn
        duration = int((time.monotonic() - turn.started) * 1000)
        lines = self.log.ending(
            status.value,
            turn.step + 1,
            turn.usage.turn,
            duration_ms=duration,
            error=error,
            final=final,
            join=join,
        )
        return Ending(status, error, duration, lines)

    async def complete(
        self,
        stored: StoredMessage | None,
        status: TurnStatus,
        final_text: str,
        *,
        pending: Sequence[ToolCall] = (),
        error: str = "",
        final: tuple[int, str] | None = None,
    ) -> TurnCompleted:
        """The turn's end, once its answer and usage are stored: ``ended``, its lines
        written now."""
        ending = self.ending(status, error=error, final=final, join=False)
        return await self.ended(stored, ending, final_text, pending=pending)

    async def ended(
        self,
        stored: StoredMessage | None,
        ending: Ending,
        final_text: str,
        *,
        pending: Sequence[ToolCall] = (),
    ) -> TurnCompleted:
        """The turn's end, once its answer and usage are stored (with the end's lines,
        where the log joined that write): logged, handed to the work after the turn when
        it is ok, and reported."""
        turn = self.turn
        usage = turn.usage
        totals = usage.session
        assert totals is not None, "every turn stores its answer and usage before it ends"
        status, error, duration = ending.status, ending.error, ending.duration_ms
        await self.log.written(ending.lines)
        self.metrics.chat_turn_ended(status.value)
        # An ephemeral turn's session is never stored: no work after it.
        if self.after_turn is not None and status is TurnStatus.OK and not turn.ephemeral:
            # Memory extraction and summaries run in the background: the completed
            # event does not wait for them.
            session = turn.session
            self.after_turn.schedule(
                FinishedTurn(
                    session.id,
                    session.user_id,
                    turn.index,
                    turn.tokenizer,
                    session.tenant_id,
                    self.token_budget,
                    self.compaction,
                )
            )
        self.completed = True
        return TurnCompleted(
            assistant_message_id=str(stored.id) if stored else "",
            final_text=final_text,
            status=status,
            error_message=error,
            step_usage=usage.step,
            turn_usage=usage.turn,
            session_usage=totals,
            duration_ms=duration,
            pending_tool_calls=tuple(pending),
        )

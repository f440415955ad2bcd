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
from contextd.store.models import StoredMessage


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
        """The turn's end, once its answer and usage are stored: logged (after the
        answer's ``final`` line: its step and text, when it answered), handed to the
        work after the turn when it is ok, and reported."""
        turn = self.turn
        usage = turn.usage
        totals = usage.session
        assert totals is not None, "every turn stores its answer and usage before it ends"
        duration = int((time.monotonic() - turn.started) * 1000)
        await self.log.turn_end(
            status.value, turn.step + 1, usage.turn, duration_ms=duration, error=error, final=final
        )
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

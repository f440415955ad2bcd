"""Closing a chat turn that never ended: its process was cut off (SIGKILL, a crash, a
power cut) while the turn ran, leaving the turn's partial_answers row
(store/partial_answers.py).

Closing it stores the text its streaming step had saved as the turn's assistant message,
with status ``interrupted`` (nothing when none was saved), adds the usage the row knew to
the session's (a figure no provider reported counted as a turn does: the prompt's from the
estimate, the completion from the kept text, marked estimated), and logs the turn's end:
an ``assistant`` event with that text, then a ``turn_end`` event with status
``interrupted`` and the turn's duration up to the last moment its process was seen
running it (the row's last save or renewal). The events are written first and the
message with the row's deletion after, in one transaction: a close that stops between the
two finds the row again, sees the turn's end in the log and only stores the message.

Rows are closed at start, before the server serves (``close_left_behind``): a row found
then is a turn that never ended. On a database other processes share, only rows whose
lease expired are (another replica's live turns are not), each taken over first so that
one process closes it. The next turn of such a session closes it too, when it finds it
once the row's lease expired (session_lease.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from contextd.app.chat.event_log import TurnLog
from contextd.app.chat.events import TurnStatus
from contextd.app.chat.turn import TokenUsage
from contextd.core.messages import ChatMessage, Role
from contextd.core.pipeline import is_blank
from contextd.core.tokens import TokenizerRegistry
from contextd.store.conversation import ConversationRepo
from contextd.store.event_log.events import EventStore
from contextd.store.models import new_message
from contextd.store.partial_answers import PartialAnswer, PartialAnswerRepo

log = logging.getLogger("contextd.chat")


@dataclass(frozen=True, slots=True)
class InterruptedTurns:
    """Closes the turns whose process's end cut them off."""

    _partials: PartialAnswerRepo
    _conversation: ConversationRepo
    _events: EventStore
    _tokenizers: TokenizerRegistry

    async def close_left_behind(self) -> int:
        """Close every turn a partial answer was left behind by; how many were closed.
        One that cannot be closed now is logged and left for the next start."""
        closed = 0
        async for left in self._partials.abandoned():
            try:
                await self.close(left)
            except Exception as error:
                log.warning(
                    "could not close an interrupted turn; the next start tries again",
                    extra={**_turn_ids(left), "error": repr(error)},
                )
                continue
            closed += 1
        return closed

    async def close(self, left: PartialAnswer) -> None:
        """Close the turn of ``left`` (a row of this process now) and remove the row; a
        row of turn 0 is a claim whose turn stored nothing, only removed."""
        if left.turn_index == 0:
            await self._partials.release(left.session_id, left.owner)
            return
        await self._close(left)
        log.info(
            "closed an interrupted turn",
            extra={**_turn_ids(left), "step": left.step, "kept_chars": len(left.text)},
        )

    async def _close(self, left: PartialAnswer) -> None:
        has_text = not is_blank(left.text)
        status = TurnStatus.INTERRUPTED.value
        rows = []
        if has_text:
            message = ChatMessage(Role.ASSISTANT, left.text)
            rows.append(
                new_message(self._tokenizers, message, left.turn_index, status, left.tokenizer)
            )
        # Figures no provider reported are counted as a turn's are, from the kept text.
        usage = TokenUsage.of(left.usage)
        counter = self._tokenizers.get(left.tokenizer)
        usage.fill_unreported(counter, left.text if has_text else "")
        if not await self._turn_ended_in_log(left):
            turn_log = TurnLog(self._events, left.session_id, left.tenant_id, left.turn_index)
            if has_text:
                turn_log.assistant(left.step, left.text, usage)
            duration = _duration_ms(left)
            ending = turn_log.ending(status, left.step + 1, usage, duration_ms=duration, join=False)
            await turn_log.written(ending)
        await self._conversation.append_with_usage(
            left.session_id,
            left.user_id,
            rows,
            usage.totals(),
            tenant_id=left.tenant_id,
            also=(self._partials.deleting(left.session_id, left.owner),),
        )

    async def _turn_ended_in_log(self, left: PartialAnswer) -> bool:
        """Whether the turn's last event in the session's log is its end."""
        last = None
        async for event in self._events.read(left.session_id, tenant_id=left.tenant_id):
            if event.get("turn") == left.turn_index:
                last = event.get("type")
        return last == "turn_end"


def _duration_ms(left: PartialAnswer) -> int:
    """From the turn's start to its row's last update: when its process last ran it."""
    return max(0, round((left.updated_at - left.started_at) * 1000))


def _turn_ids(left: PartialAnswer) -> dict[str, object]:
    return {"session_id": left.session_id, "tenant_id": left.tenant_id, "turn": left.turn_index}

"""Closing a chat turn that never ended: its process was cut off (SIGKILL, a crash, a
power cut) while the turn ran, leaving the turn's partial_answers row
(store/partial_answers.py).

Closing it stores the text its streaming step had saved as the turn's assistant message,
with status ``interrupted`` (nothing when none was saved), adds the usage the row knew to
the session's (a figure no provider reported counted as a turn does: the prompt's from the
estimate, the completion from the kept text, marked estimated), and logs the turn's end:
an ``assistant`` event with that text, then a ``turn_end`` event with status
``interrupted``. The events are written first and the
message with the row's deletion after, in one transaction: a close that stops between the
two finds the row again, sees the turn's end in the log and only stores the message.

Rows are closed at start (app/interrupted_turns.py) and, where processes share the
database, by the next turn of the session once the row's lease expired
(app/chat/session_lease.py).
"""

from __future__ import annotations

import logging

from contextd.app.chat.events import TurnStatus
from contextd.app.sessions import SessionsApp
from contextd.core.messages import ChatMessage, Role
from contextd.core.pipeline import is_blank
from contextd.store.event_log.events import event_tokens
from contextd.store.partial_answers import PartialAnswer, PartialAnswerRepo
from contextd.store.sessions import UsageTotals

log = logging.getLogger("contextd.chat")


async def close_turn(
    left: PartialAnswer, partials: PartialAnswerRepo, sessions: SessionsApp
) -> None:
    """Close the turn of ``left`` (a row of this process now) and remove the row; a row of
    turn 0 is a claim whose turn stored nothing, only removed."""
    if left.turn_index == 0:
        await partials.release(left.session_id, left.owner)
        return
    await _close(left, partials, sessions)
    log.info(
        "closed an interrupted turn",
        extra={**turn_ids(left), "step": left.step, "kept_chars": len(left.text)},
    )


async def _close(left: PartialAnswer, partials: PartialAnswerRepo, sessions: SessionsApp) -> None:
    events = sessions.event_log
    has_text = not is_blank(left.text)
    rows = []
    if has_text:
        message = ChatMessage(Role.ASSISTANT, left.text)
        status = TurnStatus.INTERRUPTED.value
        rows.append(sessions.new_message(message, left.turn_index, status, left.tokenizer))
    text_tokens = sessions.tokenizers.get(left.tokenizer).count(left.text) if has_text else 0
    usage = _with_unreported(left.usage, text_tokens)
    tokens = event_tokens(
        usage.prompt_tokens,
        usage.completion_tokens,
        cache_read=usage.cache_read_tokens,
        cache_write=usage.cache_write_tokens,
        estimated=usage.estimated,
    )
    if not await _turn_ended_in_log(left, sessions):
        if has_text:
            await events.append(
                left.session_id,
                "assistant",
                turn=left.turn_index,
                step=left.step,
                content=left.text,
                role="assistant",
                meta={"tokens": tokens},
                tenant_id=left.tenant_id,
            )
        status = TurnStatus.INTERRUPTED.value
        await events.append(
            left.session_id,
            "turn_end",
            turn=left.turn_index,
            meta={"status": status, "stepCount": left.step + 1, "tokens": tokens},
            tenant_id=left.tenant_id,
        )
    await sessions.conversation.append_with_usage(
        left.session_id,
        left.user_id,
        rows,
        usage,
        tenant_id=left.tenant_id,
        also=partials.deleting(left.session_id, left.owner),
    )


def _with_unreported(usage: UsageTotals, text_tokens: int) -> UsageTotals:
    """``usage`` with the figures it lacks: the prompt estimate for a prompt no provider
    reported, the kept text's count (``text_tokens``) for a completion."""
    if not usage.prompt_tokens and usage.prompt_tokens_estimate:
        usage = usage._replace(prompt_tokens=usage.prompt_tokens_estimate, estimated=True)
    if not usage.completion_tokens and text_tokens:
        usage = usage._replace(completion_tokens=text_tokens, estimated=True)
    return usage


async def _turn_ended_in_log(left: PartialAnswer, sessions: SessionsApp) -> bool:
    """Whether the turn's last event in the session's log is its end."""
    last = None
    async for event in sessions.event_log.read(left.session_id, tenant_id=left.tenant_id):
        if event.get("turn") == left.turn_index:
            last = event.get("type")
    return last == "turn_end"


def turn_ids(left: PartialAnswer) -> dict[str, object]:
    return {"session_id": left.session_id, "tenant_id": left.tenant_id, "turn": left.turn_index}

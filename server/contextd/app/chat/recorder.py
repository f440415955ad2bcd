"""A turn as it is stored: its messages, its usage and its partial answer (its end is
turn_end.py's)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from contextd.app.chat.events import TurnCompleted, TurnStatus
from contextd.app.chat.turn import Turn
from contextd.app.chat.turn_end import TurnEnd
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.pipeline import is_blank
from contextd.core.tokens import TokenizerRegistry
from contextd.store.conversation import ConversationRepo
from contextd.store.models import AnswerRecord, NewMessage, StoredMessage, UsageTotals, new_message
from contextd.store.partial_answers import PartialAnswerRepo


class TurnRecorder:
    """Stores a turn whatever ends it: its input before the model is called, each step it
    goes on after, its answer with the turn's usage when it ends, with a status when it
    ends early, then ends it (``end``). Meanwhile the turn's partial_answers row, opened
    with its input, keeps what the streaming step said (``PartialAnswerWriter``), for a server
    killed before the turn ends."""

    __slots__ = (
        "_conversation", "_note", "_opened", "_partials", "_tokenizers", "_turn", "_writer",
        "end", "kept",
    )  # fmt: skip

    def __init__(
        self,
        turn: Turn,
        conversation: ConversationRepo,
        partials: PartialAnswerRepo,
        tokenizers: TokenizerRegistry,
        end: TurnEnd,
        note: str = "",
    ) -> None:
        self._turn = turn
        self._note = note  # the host's, kept with the answer (answer_records)
        self._conversation = conversation
        self._partials = partials
        self._tokenizers = tokenizers
        self.end = end
        self._writer = PartialAnswerWriter(partials, turn)
        self._opened = False  # the turn's partial_answers row is written
        self.kept: list[ChatMessage] = []  # this call's steps: prebuilt contexts go on from them

    # The steps.

    def begin_step(self, prompt_tokens_estimate: int) -> None:
        """A model call starts: its text is saved as it streams."""
        self._turn.begin_step(prompt_tokens_estimate)
        self._writer.start()

    def end_step(self, calls: Sequence[ToolCall]) -> None:
        """The model call's stream ended, however it ended (``calls``: its tool calls)."""
        self._writer.stop()
        self._turn.end_step(calls)

    # Storing messages.

    def row(self, message: ChatMessage, status: str = "") -> NewMessage:
        """A message of this turn to store, with its token counts (the turn's
        tokenizer's among them: the next turn builds with it)."""
        turn = self._turn
        return new_message(self._tokenizers, message, turn.index, status, turn.tokenizer)

    async def store(self, rows: Sequence[NewMessage], *, step: bool = True) -> list[StoredMessage]:
        """Messages of its steps (tool results, observations; ``kept`` too) or its input
        (``step`` False); the turn's first write opens its partial_answers row with them."""
        if step:
            self.kept.extend(row.message for row in rows)
        turn = self._turn
        session = turn.session
        opening = None
        if not self._opened:
            opening = self._partials.opening(
                session.tenant_id, session.id, turn.index, turn.tokenizer, turn.step
            )
        stored = await self._conversation.append(
            session.id, turn.user_id, rows, tenant_id=session.tenant_id, also=opening
        )
        self._opened = True
        return stored

    async def store_step(self, message: ChatMessage) -> StoredMessage | None:
        """An assistant message the turn goes on after (its tool calls answered here);
        the partial answer is emptied with it: the next step's text comes next."""
        self.kept.append(message)
        await self._writer.settle()
        turn = self._turn
        emptying = self._partials.emptying(turn.session.id, turn.step + 1, turn.usage.so_far())
        [stored] = await self._conversation.append(
            turn.session.id,
            turn.user_id,
            [self.row(message)],
            tenant_id=turn.session.tenant_id,
            also=emptying,
        )
        return stored

    async def store_answer(self, message: ChatMessage, status: str = "") -> StoredMessage | None:
        """The turn's last assistant message (none when it is blank) and its usage, in
        one transaction, which deletes the partial answer: the turn's last write but the
        event log's."""
        await self._writer.settle()
        turn = self._turn
        rows = []
        if not is_blank(message.content) or message.tool_calls:
            rows.append(self.row(message, status))
        stored, totals = await self._conversation.append_with_usage(
            turn.session.id,
            turn.user_id,
            rows,
            turn.usage.turn.totals(),
            tenant_id=turn.session.tenant_id,
            also=self._partials.deleting(turn.session.id),
            answer=AnswerRecord(turn.model, turn.usage.turn.totals(), self._note),
        )
        turn.usage.stored(totals)
        return stored[0] if stored else None

    # Ending the turn.

    async def answer(self, text: str, final_text: str) -> TurnCompleted:
        """The step answered the user: store ``text`` and end the turn ok, reporting
        ``final_text``."""
        turn = self._turn
        stored = await self.store_answer(ChatMessage(Role.ASSISTANT, text))
        # The final line goes with turn_end, in one write.
        return await self.end.complete(stored, TurnStatus.OK, final_text, final=(turn.step, text))

    async def store_partial(self, status: TurnStatus, error: str) -> TurnCompleted:
        """Keep what the model said in the step that broke off, marked with its status
        (earlier steps' text is stored with their tool calls), unless the turn's answer
        was stored already and only its end is missing."""
        turn = self._turn
        turn.usage.count_step()  # the prompt was sent all the same
        stored = None
        if turn.usage.session is None:
            message = ChatMessage(Role.ASSISTANT, turn.step_text)
            stored = await self.store_answer(message, status.value)
        return await self.end.complete(stored, status, turn.text, error=error)


# Saving the text a model step streams, so that a killed server keeps most of it; where
# processes share the database, renewing the session's lease the row is.
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

"""A turn as it is stored: its messages, its usage and its partial answer (its end is
turn_end.py's)."""

from __future__ import annotations

from collections.abc import Sequence

from contextd.app.chat.events import TurnCompleted, TurnStatus
from contextd.app.chat.partial_writer import PartialAnswerWriter
from contextd.app.chat.turn import Turn
from contextd.app.chat.turn_end import TurnEnd
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.pipeline import is_blank
from contextd.core.tokens import TokenizerRegistry
from contextd.store.conversation import ConversationRepo
from contextd.store.event_log.events import LogLines
from contextd.store.models import AnswerRecord, NewMessage, StoredMessage, new_message
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

    async def store(
        self, rows: Sequence[NewMessage], *, step: bool = True, logged: LogLines | None = None
    ) -> list[StoredMessage]:
        """Messages of its steps (tool results, observations; ``kept`` too) or its input
        (``step`` False); the turn's first write opens its partial_answers row with them.
        ``logged``: log lines written with them (in their write, where the log can join
        it)."""
        if step:
            self.kept.extend(row.message for row in rows)
        turn = self._turn
        session = turn.session
        also = logged.also if logged else ()
        if not self._opened:
            opening = self._partials.opening(
                session.tenant_id, session.id, turn.index, turn.tokenizer, turn.step
            )
            also = (opening, *also)
        stored = await self._conversation.append(
            session.id, turn.user_id, rows, tenant_id=session.tenant_id, also=also
        )
        self._opened = True
        if logged is not None:
            await self.end.log.written(logged)
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
            also=(emptying,),
        )
        return stored

    async def store_answer(
        self, message: ChatMessage, status: str = "", logged: LogLines | None = None
    ) -> StoredMessage | None:
        """The turn's last assistant message (none when it is blank) and its usage, in
        one transaction, which deletes the partial answer: the turn's last write but the
        event log's (``logged``: log lines written with it, where the log can join it)."""
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
            also=(self._partials.deleting(turn.session.id), *(logged.also if logged else ())),
            answer=AnswerRecord(turn.model, turn.usage.turn.totals(), self._note),
        )
        turn.usage.stored(totals)
        return stored[0] if stored else None

    # Ending the turn.

    async def answer(self, text: str, final_text: str) -> TurnCompleted:
        """The step answered the user: store ``text`` and end the turn ok, reporting
        ``final_text``."""
        message = ChatMessage(Role.ASSISTANT, text)
        # The final line goes with turn_end, in one write.
        final = (self._turn.step, text)
        return await self.finish(message, TurnStatus.OK, final_text, final=final)

    async def finish(
        self,
        message: ChatMessage,
        status: TurnStatus,
        final_text: str,
        *,
        message_status: str = "",
        error: str = "",
        final: tuple[int, str] | None = None,
    ) -> TurnCompleted:
        """Store the turn's answer (``store_answer``) and end the turn with ``status``,
        the end's log lines written with the answer where the log can join that write."""
        ending = self.end.ending(status, error=error, final=final)
        stored = await self.store_answer(message, message_status, ending.lines)
        return await self.end.ended(stored, ending, final_text)

    async def store_partial(self, status: TurnStatus, error: str) -> TurnCompleted:
        """Keep what the model said in the step that broke off, marked with its status
        (earlier steps' text is stored with their tool calls), unless the turn's answer
        was stored already and only its end is missing."""
        turn = self._turn
        turn.usage.count_step()  # the prompt was sent all the same
        if turn.usage.session is None:
            message = ChatMessage(Role.ASSISTANT, turn.step_text)
            return await self.finish(
                message, status, turn.text, message_status=status.value, error=error
            )
        return await self.end.complete(None, status, turn.text, error=error)

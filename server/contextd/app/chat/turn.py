"""One turn in progress: what it has done so far, and how it is stored and logged."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from contextd.app.chat.events import FinishedTurn, TokenUsage, TurnCompleted, TurnStatus
from contextd.app.chat.partial_writer import PartialAnswerWriter
from contextd.app.sessions import SessionsApp
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.pipeline import is_blank
from contextd.core.tokens import Tokenizer
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.providers.base import Finished, Usage
from contextd.store.event_log.events import EventStore, event_tokens
from contextd.store.models import NewMessage, Session, StoredMessage
from contextd.store.partial_answers import PartialAnswerRepo
from contextd.store.sessions import UsageTotals


class Turn:
    """One user input to a final answer; a step is one model call. Holds enough to
    store the turn whatever ends it: its input is stored before the model is called,
    its answer (with the turn's usage) when it ends, with a status when it ends early.
    Meanwhile the turn's partial_answers row, opened with its input, keeps what the
    streaming step said (``partial``), for a server killed before the turn ends."""

    __slots__ = (
        "_after_turn",
        "_counter",
        "_delta_seen",
        "_events",
        "_metrics",
        "_opened",
        "_partials",
        "_sessions",
        "completed",
        "first_step",
        "index",
        "partial",
        "question",
        "session",
        "session_usage",
        "started",
        "step",
        "step_counted",
        "step_finish",
        "step_start",
        "step_usage",
        "text",
        "tokenizer",
        "usage",
        "user_id",
    )

    def __init__(
        self,
        session: Session,
        index: int,
        user_id: str,
        tokenizer: Tokenizer,
        question: str,
        sessions: SessionsApp,
        events: EventStore,
        after_turn: Callable[[FinishedTurn], None] | None,
        partials: PartialAnswerRepo,
        metrics: Recorder = NULL_RECORDER,
    ) -> None:
        self.session = session
        self.index = index
        self.user_id = user_id  # the caller's: the stored messages are theirs
        self.tokenizer = tokenizer.name
        self._counter = tokenizer  # counts what a provider reports no usage for
        # The user message the turn answers, also when it goes on after tool results or
        # an observation: every step's memory layer searches with it.
        self.question = question
        self.started = time.monotonic()
        # Steps count on through the turn: a turn continued with tool results goes on
        # from the steps before them (``continue_from``).
        self.step = 0
        self.first_step = 0  # this call's first: the step limit is per call
        self.text = ""  # every step's text, as streamed
        self.step_start = 0  # where the current step's text begins in ``text``
        self.usage = TokenUsage()
        self.step_usage = TokenUsage()
        self.step_counted = True  # step_usage is in usage
        # How the provider ended the step's stream; None: it did not (yet).
        self.step_finish: Finished | None = None
        # The session's usage totals once the turn's usage is stored (with its answer).
        self.session_usage: TokenUsage | None = None
        self.completed = False  # its TurnCompleted is made: nothing is left to store
        self._sessions = sessions
        self._events = events
        self._after_turn = after_turn
        self._partials = partials
        self._metrics = metrics
        self._delta_seen = False
        self._opened = False  # the turn's partial_answers row is written
        self.partial = PartialAnswerWriter(partials, self)

    def first_delta(self) -> None:
        """A text delta arrives while the turn has no text yet (an empty delta leaves
        it so): the first one is timed."""
        if not self._delta_seen:
            self._delta_seen = True
            self._metrics.first_delta(time.monotonic() - self.started)

    # The steps.

    def continue_from(self, steps_so_far: int) -> None:
        """The turn made ``steps_so_far`` model calls before the tool results it goes on
        with; the next call is the one after them."""
        self.step = self.first_step = steps_so_far

    @property
    def steps_this_call(self) -> int:
        """Model calls this StreamChat call made, the current one included."""
        return self.step - self.first_step + 1

    def begin_step(self, prompt_tokens_estimate: int) -> None:
        """A model call starts: its usage is counted into the turn's once it ends
        (``count_step``), however it ends."""
        self.step_usage = TokenUsage(prompt_tokens_estimate=prompt_tokens_estimate)
        self.step_counted = False
        self.step_finish = None
        self.step_start = len(self.text)
        self.partial.start()

    def take_usage(self, reported: Usage, calls: Sequence[ToolCall]) -> TokenUsage:
        """The provider's usage of the current step, which has said all it says
        (``calls``: its tool calls)."""
        u = self.step_usage
        u.prompt_tokens = reported.prompt_tokens
        u.completion_tokens = reported.completion_tokens
        u.cache_read_tokens = reported.cache_read_tokens
        u.cache_write_tokens = reported.cache_write_tokens
        u.estimated = reported.estimated
        self._count_unreported(calls)
        return u

    def end_step(self, calls: Sequence[ToolCall]) -> None:
        """The model call's stream ended, however it ended (``calls``: its tool calls)."""
        self.partial.stop()
        if self.step_finish is not None or calls or self.step_start < len(self.text):
            # The model saw the prompt: a call that broke off before it said anything
            # may not have got that far, and counts only the estimate, apart.
            self._count_unreported(calls)
        self.count_step()

    def _count_unreported(self, calls: Sequence[ToolCall]) -> None:
        """Figures the provider did not report (none, or 0) for the current step: the
        prompt's is its estimate, the completion is counted with the turn's tokenizer
        (the step's text, its tool calls' names and arguments); the usage is then
        marked estimated."""
        u = self.step_usage
        if not u.prompt_tokens and u.prompt_tokens_estimate:
            u.prompt_tokens = u.prompt_tokens_estimate
            u.estimated = True
        if not u.completion_tokens:
            count = self._counter.count
            u.completion_tokens = count(self.step_text) + sum(
                count(c.name) + count(c.arguments) for c in calls
            )
            u.estimated = u.estimated or u.completion_tokens > 0

    def count_step(self) -> None:
        """Add the current step's usage to the turn's, once."""
        if not self.step_counted:
            self.usage.add(self.step_usage)
            self.step_counted = True

    def usage_so_far(self) -> UsageTotals:
        """The turn's usage, the current step's included (its estimate, until the
        provider reports) if it is not counted yet."""
        if self.step_counted:
            return self.usage.totals()
        u = TokenUsage()
        u.add(self.usage)
        u.add(self.step_usage)
        return u.totals()

    @property
    def step_text(self) -> str:
        return self.text[self.step_start :]

    async def log_step(self) -> None:
        """Log the model call that just ended."""
        await self.event(
            "assistant",
            step=self.step,
            content=self.step_text,
            role="assistant",
            meta={"tokens": _tokens(self.step_usage)},
        )

    # Storing messages.

    def row(self, message: ChatMessage, status: str = "") -> NewMessage:
        """A message of this turn to store, with its token counts (the turn's
        tokenizer's among them: the next turn builds with it)."""
        return self._sessions.new_message(message, self.index, status, self.tokenizer)

    async def store(self, rows: Sequence[NewMessage]) -> list[StoredMessage]:
        """Messages of the turn; the turn's input (its first) opens its partial_answers
        row, in the same transaction."""
        session = self.session
        opening = None
        if not self._opened:
            opening = self._partials.opening(
                session.tenant_id, session.id, self.index, self.tokenizer, self.step
            )
        stored = await self._sessions.conversation.append(
            session.id, self.user_id, rows, tenant_id=session.tenant_id, also=opening
        )
        self._opened = True
        return stored

    async def store_step(self, message: ChatMessage) -> StoredMessage:
        """An assistant message the turn goes on after (its tool calls answered here);
        the partial answer is emptied with it: the next step's text comes next."""
        await self.partial.settle()
        emptying = self._partials.emptying(self.session.id, self.step + 1, self.usage_so_far())
        [stored] = await self._sessions.conversation.append(
            self.session.id,
            self.user_id,
            [self.row(message)],
            tenant_id=self.session.tenant_id,
            also=emptying,
        )
        return stored

    async def store_answer(self, message: ChatMessage, status: str = "") -> StoredMessage | None:
        """The turn's last assistant message (none when it is blank) and its usage, in
        one transaction, which deletes the partial answer: the turn's last write but the
        event log's."""
        await self.partial.settle()
        rows = []
        if not is_blank(message.content) or message.tool_calls:
            rows.append(self.row(message, status))
        stored, totals = await self._sessions.conversation.append_with_usage(
            self.session.id,
            self.user_id,
            rows,
            self.usage.totals(),
            tenant_id=self.session.tenant_id,
            also=self._partials.deleting(self.session.id),
        )
        self.session_usage = TokenUsage(*totals)
        return stored[0] if stored else None

    # Ending the turn.

    async def answer(self, text: str, final_text: str) -> TurnCompleted:
        """The step answered the user: store ``text`` and end the turn ok, reporting
        ``final_text``."""
        stored = await self.store_answer(ChatMessage(Role.ASSISTANT, text))
        await self.event(
            "final",
            step=self.step,
            content=text,
            role="assistant",
            meta={"tokens": _tokens(self.usage)},
        )
        return await self.complete(stored, TurnStatus.OK, final_text)

    async def store_partial(self, status: TurnStatus, error: str) -> TurnCompleted:
        """Keep what the model said in the step that broke off, marked with its status
        (earlier steps' text is stored with their tool calls), unless the turn's answer
        was stored already and only its end is missing."""
        stored = None
        if self.session_usage is None:
            message = ChatMessage(Role.ASSISTANT, self.step_text)
            stored = await self.store_answer(message, status.value)
        return await self.complete(stored, status, self.text, error=error)

    async def complete(
        self,
        stored: StoredMessage | None,
        status: TurnStatus,
        final_text: str,
        *,
        pending: Sequence[ToolCall] = (),
        error: str = "",
    ) -> TurnCompleted:
        """The turn's end, once its answer and usage are stored: logged, handed to the
        work after the turn when it is ok, and reported."""
        u = self.usage
        totals = self.session_usage
        assert totals is not None, "every turn stores its answer and usage before it ends"
        duration = int((time.monotonic() - self.started) * 1000)
        meta: dict[str, object] = {
            "status": status.value,
            "stepCount": self.step + 1,
            "durationMs": duration,
            "tokens": _tokens(u),
        }
        if error:
            meta["errorMessage"] = error
        await self.event("turn_end", meta=meta)
        self._metrics.chat_turn_ended(status.value)
        if self._after_turn is not None and status is TurnStatus.OK:
            # Memory extraction and summaries run in the background: the completed
            # event does not wait for them.
            self._after_turn(
                FinishedTurn(
                    self.session.id,
                    self.session.user_id,
                    self.index,
                    self.tokenizer,
                    self.session.tenant_id,
                )
            )
        self.completed = True
        return TurnCompleted(
            assistant_message_id=str(stored.id) if stored else "",
            final_text=final_text,
            status=status,
            error_message=error,
            step_usage=self.step_usage,
            turn_usage=u,
            session_usage=totals,
            duration_ms=duration,
            pending_tool_calls=tuple(pending),
        )

    # The session's event log.

    async def event(
        self,
        type: str,
        *,
        step: int | None = None,
        content: str | None = None,
        role: str | None = None,
        meta: dict[str, object] | None = None,
    ) -> None:
        await self._events.append(
            self.session.id,
            type,
            turn=None if type == "session_start" else self.index,
            step=step,
            content=content,
            role=role,
            meta=meta,
            tenant_id=self.session.tenant_id,
        )


def _tokens(u: TokenUsage) -> dict[str, int | bool]:
    """``meta.tokens`` of a usage: a prompt figure no one reported is the estimate."""
    return event_tokens(
        u.prompt_tokens or u.prompt_tokens_estimate,
        u.completion_tokens,
        cache_read=u.cache_read_tokens,
        cache_write=u.cache_write_tokens,
        estimated=u.estimated or (not u.prompt_tokens and u.prompt_tokens_estimate > 0),
    )

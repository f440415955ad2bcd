"""One turn in progress: which turn of which session, its steps, the text they streamed,
and its usage, accounted per step, turn and session. The state only: storing the turn is
recorder.py's work, logging it event_log.py's.

A provider reports a call's usage, or not: many OpenAI-compatible local servers send no
usage, or zeros. The figures it leaves out are counted here, the one place that decides
how (``TokenUsage.fill_unreported``): the prompt's is the call's estimate, the completion
is the call's text (and its tool calls) counted with the turn's tokenizer, and the usage
is then marked estimated. A turn a server's end cut off is counted the same way when it
is closed (interrupted.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from contextd.core.messages import ToolCall
from contextd.core.tokens import Tokenizer
from contextd.providers.base import Finished, Usage
from contextd.store.models import Session, UsageTotals


@dataclass(slots=True)
class TokenUsage:
    """A step's, a turn's or a session's usage; the figures as in UsageTotals."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_estimate: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    estimated: bool = False

    @classmethod
    def of(cls, totals: UsageTotals) -> TokenUsage:
        return cls(*totals)

    def add(self, other: TokenUsage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.prompt_tokens_estimate += other.prompt_tokens_estimate
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.estimated = self.estimated or other.estimated

    def take_reported(self, reported: Usage) -> None:
        """What the provider reported of the call, over anything counted before."""
        self.prompt_tokens = reported.prompt_tokens
        self.completion_tokens = reported.completion_tokens
        self.cache_read_tokens = reported.cache_read_tokens
        self.cache_write_tokens = reported.cache_write_tokens
        self.estimated = reported.estimated

    def fill_unreported(
        self, counter: Tokenizer, text: str, calls: Sequence[ToolCall] = ()
    ) -> None:
        """Figures the provider did not report (none, or 0): the prompt's is the estimate,
        the completion is ``text`` and ``calls`` (names and arguments) counted with
        ``counter``; either marks the usage estimated."""
        if not self.prompt_tokens and self.prompt_tokens_estimate:
            self.prompt_tokens = self.prompt_tokens_estimate
            self.estimated = True
        if not self.completion_tokens:
            count = counter.count
            self.completion_tokens = count(text) + sum(
                count(c.name) + count(c.arguments) for c in calls
            )
            self.estimated = self.estimated or self.completion_tokens > 0

    def totals(self) -> UsageTotals:
        return UsageTotals(
            self.prompt_tokens,
            self.completion_tokens,
            self.prompt_tokens_estimate,
            self.cache_read_tokens,
            self.cache_write_tokens,
            self.estimated,
        )


class TurnUsage:
    """A turn's usage as its steps run: the current step's (``step``), the turn's, into
    which each step is counted once, however it ended (``turn``), and the session's totals
    once the turn's usage is stored with its answer (``session``, None until then; an
    ephemeral turn's own)."""

    __slots__ = ("_counted", "session", "step", "turn")

    def __init__(self) -> None:
        self.step = TokenUsage()
        self.turn = TokenUsage()
        self.session: TokenUsage | None = None
        self._counted = True  # the step's usage is in the turn's

    def begin_step(self, prompt_tokens_estimate: int) -> None:
        self.step = TokenUsage(prompt_tokens_estimate=prompt_tokens_estimate)
        self._counted = False

    def count_step(self) -> None:
        """Add the current step's usage to the turn's, once."""
        if not self._counted:
            self.turn.add(self.step)
            self._counted = True

    def so_far(self) -> UsageTotals:
        """The turn's usage, the current step's included (its estimate, until the
        provider reports) if it is not counted yet."""
        if self._counted:
            return self.turn.totals()
        u = TokenUsage()
        u.add(self.turn)
        u.add(self.step)
        return u.totals()

    def stored(self, session_totals: UsageTotals) -> None:
        """The turn's usage is stored: the session's totals now include it."""
        self.session = TokenUsage.of(session_totals)


class Turn:
    """One user input to a final answer; a step is one model call. Steps count on through
    the turn: a turn continued with tool results goes on from the steps before them
    (``continue_from``), while the step limit counts this call's (``steps_this_call``).

    ``step`` (the current one) and ``text`` (every step's text of this call, as streamed)
    are read by all, and changed only by the methods below; they are plain attributes
    since every text delta reads or grows them."""

    __slots__ = (
        "_counter",
        "_finish",
        "_first_step",
        "_step_start",
        "index",
        "model",
        "question",
        "session",
        "started",
        "step",
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
        model: str = "",
    ) -> None:
        self.session = session
        self.index = index
        self.model = model  # the model asked for: the request's, else the provider's
        self.user_id = user_id  # the caller's: the stored messages are theirs
        self.tokenizer = tokenizer.name
        self._counter = tokenizer  # counts what a provider reports no usage for
        # The user message the turn answers, also when it goes on after tool results or
        # an observation: every step's memory layer searches with it.
        self.question = question
        self.started = time.monotonic()
        self.usage = TurnUsage()
        self.step = 0
        self._first_step = 0  # this call's first: the step limit is per call
        self.text = ""
        self._step_start = 0  # where the current step's text begins in ``text``
        # How the provider ended the step's stream; None: it did not (yet).
        self._finish: Finished | None = None

    @property
    def ephemeral(self) -> bool:
        """Nothing of the turn is stored (its recorder and its log write nothing): its
        session is one never stored, whose id is ""."""
        return not self.session.id

    @property
    def step_text(self) -> str:
        return self.text[self._step_start :]

    @property
    def step_finish(self) -> Finished | None:
        return self._finish

    @property
    def steps_this_call(self) -> int:
        """Model calls this StreamChat call made, the current one included."""
        return self.step - self._first_step + 1

    def continue_from(self, steps_so_far: int, question: str) -> None:
        """The turn made ``steps_so_far`` model calls before the tool results it goes on
        with, the next call being the one after them; ``question``: the user message that
        began it."""
        self.step = self._first_step = steps_so_far
        self.question = question

    def begin_step(self, prompt_tokens_estimate: int) -> None:
        """A model call starts: its usage is counted into the turn's once it ends
        (``end_step``), however it ends."""
        self.usage.begin_step(prompt_tokens_estimate)
        self._finish = None
        self._step_start = len(self.text)

    def add_text(self, delta: str) -> None:
        self.text += delta

    def take_usage(self, reported: Usage, calls: Sequence[ToolCall]) -> TokenUsage:
        """The provider's usage of the current step, which has said all it says
        (``calls``: its tool calls)."""
        u = self.usage.step
        u.take_reported(reported)
        u.fill_unreported(self._counter, self.step_text, calls)
        return u

    def finish_step(self, finished: Finished) -> None:
        """The provider said how the step's stream ends."""
        self._finish = finished

    def end_step(self, calls: Sequence[ToolCall]) -> None:
        """The model call's stream ended, however it ended (``calls``: its tool calls)."""
        if self._finish is not None or calls or self._step_start < len(self.text):
            # The model saw the prompt: a call that broke off before it said anything
            # may not have got that far, and counts only the estimate, apart.
            self.usage.step.fill_unreported(self._counter, self.step_text, calls)
        self.usage.count_step()

    def next_step(self) -> None:
        """The step's tools were answered within the turn: the next model call follows.
        It begins with building its context, so a turn that ends there counts it."""
        self.step += 1

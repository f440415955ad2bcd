"""How a turn offers tools to the model: the strategy behind the turn's one step loop.

After each model step the loop asks the protocol what the step's output asks for
(``read_step``) and goes on with the answer:

- ``FinalAnswer``: the turn ends ok with it;
- ``HostAction``: a tool the host runs; the protocol ends the turn waiting for the
  host's results (``require_action``), which a later request brings
  (``open_calls``, ``take_host_results``);
- ``InlineAction``: only tools answered within the turn (``memory_search``,
  ``recall_tool_result``); the
  protocol answers them (``answer_inline``) and makes the next step's request with
  their results (``next_request``), or, at the step limit, ends the turn
  (``stop_at_step_limit``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from contextd.app.chat.event_log import TurnLog
from contextd.app.chat.events import ChatEvent, TurnCompleted
from contextd.app.chat.inline_tools import MemorySearch, RecallToolResult
from contextd.app.chat.recorder import TurnRecorder
from contextd.app.chat.request import ChatTurnRequest
from contextd.app.chat.step_context import StepContexts
from contextd.app.chat.turn import Turn
from contextd.core.build_request import BuildResult, CacheLayout
from contextd.core.messages import ChatMessage, ToolCall
from contextd.providers.base import ModelRequest, ToolSpec
from contextd.store.models import StoredMessage

# A step's tool use as its protocol reads it: native calls, or one ReAct action.
ToolUse = TypeVar("ToolUse")


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    """The step answers the user."""

    text: str  # the answer to store and log
    final_text: str  # what the turn's TurnCompleted reports


@dataclass(frozen=True, slots=True)
class HostAction(Generic[ToolUse]):
    """The step calls a tool the host runs."""

    text: str  # the step's text
    tool_use: ToolUse


@dataclass(frozen=True, slots=True)
class InlineAction(Generic[ToolUse]):
    """The step calls only tools answered within the turn."""

    text: str  # the step's text
    tool_use: ToolUse


StepOutcome = FinalAnswer | HostAction[ToolUse] | InlineAction[ToolUse]


@dataclass(frozen=True, slots=True)
class InlineAnswers:
    """What a step's inline tools answered: the events that show the caller their
    calls, and their results, one per call."""

    events: Sequence[ChatEvent]
    results: Sequence[str]


@dataclass(frozen=True, slots=True)
class TurnParts:
    """What a tool protocol works with, of the turn it serves: its state, how it is stored
    and logged, its steps' contexts (with room for what the protocol adds to the prompt),
    its memory searches and, when it edits its context, its recalls of tool results."""

    turn: Turn
    record: TurnRecorder
    log: TurnLog
    contexts: StepContexts
    memory: MemorySearch
    recall: RecallToolResult | None = None


class ToolProtocol(ABC, Generic[ToolUse]):
    """One turn's way of offering tools."""

    def __init__(self, req: ChatTurnRequest, parts: TurnParts) -> None:
        self.req = req
        self.turn = parts.turn
        self.record = parts.record
        self.log = parts.log
        self.contexts = parts.contexts
        self.memory = parts.memory
        self.recall = parts.recall

    @abstractmethod
    def model_request(self, context: BuildResult) -> ModelRequest:
        """The model call of a step with ``context``."""

    @abstractmethod
    def open_calls(self, recent: Sequence[StoredMessage]) -> Mapping[str, ToolCall]:
        """The host's calls that ended the session's last turn and have no result yet,
        by id; ``recent``: the session's newest messages, oldest first."""

    @abstractmethod
    async def take_host_results(self) -> tuple[BuildResult, str]:
        """The turn's first context, built with the request's tool results (they answer
        open calls) and the user message sent beside them, if any, which are stored then
        in that order; and that user message's stored id ("" when none)."""

    @abstractmethod
    def read_step(self, text: str, calls: Sequence[ToolCall]) -> StepOutcome[ToolUse]:
        """What the step's output asks for; ``calls``: the native calls it streamed."""

    @abstractmethod
    async def require_action(self, action: HostAction[ToolUse]) -> Sequence[ChatEvent]:
        """End the turn waiting for the host's results: the turn's last events, its
        TurnCompleted last."""

    @abstractmethod
    async def stop_at_step_limit(self, action: InlineAction[ToolUse]) -> TurnCompleted:
        """End the turn at the step limit, its inline tools not run."""

    @abstractmethod
    async def answer_inline(self, action: InlineAction[ToolUse]) -> InlineAnswers:
        """Run the step's inline tools."""

    @abstractmethod
    async def next_request(self, answers: InlineAnswers) -> ModelRequest:
        """The next step's model call, its context built with the inline answers."""

    def _model_request(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        estimate: int,
        stable_end: int,
    ) -> ModelRequest:
        """``stable_end``: how many leading ``messages`` stay the same next turn."""
        options = self.req.model
        stable = self.req.cache_layout is CacheLayout.STABLE_PREFIX
        return ModelRequest(
            messages=messages,
            model=options.model,
            temperature=options.temperature,
            max_output_tokens=options.max_output_tokens,
            stop=options.stop,
            tools=tools,
            tool_choice=self.req.tool_choice,
            parallel_tool_calls=self.req.parallel_tool_calls,
            response_format=options.response_format,
            prompt_tokens_estimate=estimate,
            cached_prefix=stable_end if stable else None,
        )

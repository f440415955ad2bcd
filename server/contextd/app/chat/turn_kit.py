"""A chat turn's parts, made for each turn: its event log, its recorder, its memory
searches, its steps' contexts, and the tool protocol that works with them."""

from __future__ import annotations

from typing import Any

from contextd.app.after_turn import AfterTurnRunner
from contextd.app.chat.event_log import TurnLog
from contextd.app.chat.memory_tool import MemorySearch
from contextd.app.chat.native_tools import NativeTools
from contextd.app.chat.react_tags import REFUSED_SUBJECT, ReactAddendum, ReactTags
from contextd.app.chat.recall_tool import RecallToolResult, offers_recall
from contextd.app.chat.recorder import TurnRecorder
from contextd.app.chat.request import ChatTurnRequest
from contextd.app.chat.step_context import StepContexts
from contextd.app.chat.tool_protocol import ToolProtocol, TurnParts
from contextd.app.chat.turn import Turn
from contextd.app.chat.turn_end import TurnEnd
from contextd.app.session_context import SessionContextBuilder
from contextd.core.tokens import TokenizerRegistry
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.store.conversation import ConversationRepo
from contextd.store.event_log.events import EventStore
from contextd.store.memory.repository import MemoryRepo
from contextd.store.partial_answers import PartialAnswerRepo


class TurnKit:
    """Makes a turn's parts: its event log, its recorder, its memory searches, its steps'
    contexts, and the tool protocol that works with them."""

    def __init__(
        self,
        *,
        events: EventStore,
        conversation: ConversationRepo,
        partials: PartialAnswerRepo,
        tokenizers: TokenizerRegistry,
        builder: SessionContextBuilder,
        memories: MemoryRepo,
        max_prompt_tokens: int,
        blank_user_turns: bool,
        after_turn: AfterTurnRunner | None = None,
        metrics: Recorder = NULL_RECORDER,
    ) -> None:
        # ``blank_user_turns``: whether the provider carries a user turn without text.
        self._events = events
        self._conversation = conversation
        self._partials = partials
        self._tokenizers = tokenizers
        self._builder = builder
        self._memories = memories
        self._max_prompt_tokens = max_prompt_tokens
        self._blank_user_turns = blank_user_turns
        self._after_turn = after_turn
        self._metrics = metrics

    def tool_protocol(self, req: ChatTurnRequest, turn: Turn) -> ToolProtocol[Any]:
        """The turn's way of offering tools, with the parts of the turn it works with.
        (Any: the step loop never looks into a protocol's own reading of a step.)"""
        log = TurnLog(self._events, turn.session.id, turn.session.tenant_id, turn.index)
        end = TurnEnd(
            turn,
            log,
            self._after_turn,
            self._metrics,
            token_budget=req.prompt_budget(self._max_prompt_tokens),
            compaction=req.compaction,
        )
        record = TurnRecorder(turn, self._conversation, self._partials, self._tokenizers, end)
        memory = MemorySearch(self._memories, turn, log)
        max_tokens = self._max_prompt_tokens
        if not req.react:
            contexts = StepContexts(
                self._builder, max_tokens, req, turn, blank_user_turns=self._blank_user_turns
            )
            recall = None
            if offers_recall(req.editing, req.react):
                recall = RecallToolResult(
                    self._conversation, turn, log, req.tokenizer, req.editing, req.messages
                )
            return NativeTools(req, TurnParts(turn, record, log, contexts, memory, recall))
        # The addendum is made once per turn; every context leaves room for it.
        addendum = ReactAddendum.for_request(req)
        contexts = StepContexts(
            self._builder,
            max_tokens,
            req,
            turn,
            addendum.tokens,
            REFUSED_SUBJECT,
            blank_user_turns=self._blank_user_turns,
        )
        return ReactTags(req, TurnParts(turn, record, log, contexts, memory), addendum)

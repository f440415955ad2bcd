"""A chat turn's parts, made for each turn: its event log, its recorder, its memory
searches, its steps' contexts, and the tool protocol that works with them."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnKit:
    """Makes a turn's parts: its event log, its recorder, its memory searches, its steps'
    contexts, and the tool protocol that works with them."""

    events: EventStore
    conversation: ConversationRepo
    partials: PartialAnswerRepo
    tokenizers: TokenizerRegistry
    builder: SessionContextBuilder
    memories: MemoryRepo
    max_prompt_tokens: int
    blank_user_turns: bool  # whether the provider carries a user turn without text
    after_turn: AfterTurnRunner | None = None
    metrics: Recorder = NULL_RECORDER

    def tool_protocol(self, req: ChatTurnRequest, turn: Turn) -> ToolProtocol[Any]:
        """The turn's way of offering tools, with the parts of the turn it works with.
        (Any: the step loop never looks into a protocol's own reading of a step.)"""
        log = TurnLog(self.events, turn.session.id, turn.session.tenant_id, turn.index)
        end = TurnEnd(
            turn,
            log,
            self.after_turn,
            self.metrics,
            token_budget=req.prompt_budget(self.max_prompt_tokens),
            compaction=req.compaction,
        )
        record = TurnRecorder(turn, self.conversation, self.partials, self.tokenizers, end)
        memory = MemorySearch(self.memories, turn, log)
        max_tokens = self.max_prompt_tokens
        if not req.react:
            contexts = StepContexts(
                self.builder, max_tokens, req, turn, blank_user_turns=self.blank_user_turns
            )
            recall = None
            if offers_recall(req.editing, req.react):
                recall = RecallToolResult(
                    self.conversation, turn, log, req.tokenizer, req.editing, req.messages
                )
            return NativeTools(req, TurnParts(turn, record, log, contexts, memory, recall))
        # The addendum is made once per turn; every context leaves room for it.
        addendum = ReactAddendum.for_request(req)
        contexts = StepContexts(
            self.builder,
            max_tokens,
            req,
            turn,
            addendum.tokens,
            REFUSED_SUBJECT,
            blank_user_turns=self.blank_user_turns,
        )
        return ReactTags(req, TurnParts(turn, record, log, contexts, memory), addendum)

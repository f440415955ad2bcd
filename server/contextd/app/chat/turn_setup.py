"""A chat turn's set-up, everything before the first model call: the session (held
against other processes' turns of it, where they share the database), its log started
when due, the turn's parts (``TurnKit``), the input stored and logged, and the turn's
first event with the first step's model request."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from contextd.app.after_turn import AfterTurnRunner
from contextd.app.chat.ephemeral import EphemeralRecorder
from contextd.app.chat.event_log import TurnLog, context_meta
from contextd.app.chat.events import TurnStarted
from contextd.app.chat.inline_tools import MemorySearch, RecallToolResult
from contextd.app.chat.native_tools import NativeTools
from contextd.app.chat.react_tags import REFUSED_SUBJECT, ReactAddendum, ReactTags
from contextd.app.chat.recorder import TurnRecorder
from contextd.app.chat.request import ChatTurnRequest
from contextd.app.chat.session_lease import SessionTurns
from contextd.app.chat.step_context import StepContexts
from contextd.app.chat.tool_protocol import ToolProtocol, TurnParts
from contextd.app.chat.turn import Turn
from contextd.app.chat.turn_end import TurnEnd
from contextd.app.scope import owned_session
from contextd.app.session_context import SessionContextBuilder
from contextd.app.sessions import SessionsApp
from contextd.core.errors import Violations
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.tokens import TokenizerRegistry, message_tokens
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.providers.base import ModelRequest, Provider
from contextd.store.conversation import ConversationRepo
from contextd.store.event_log.events import EventStore, SessionLog
from contextd.store.memory.repository import MemoryRepo
from contextd.store.models import Session
from contextd.store.partial_answers import Held, PartialAnswerRepo

# How far back a continuing turn looks for the calls the host's results answer.
_RECENT_FOR_OPEN_CALLS = 64
# A turn whose session holds no lease (SQLite): nothing read with one.
_NOT_HELD = Held(None)


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
        recorder = EphemeralRecorder if turn.ephemeral else TurnRecorder
        record = recorder(
            turn, self.conversation, self.partials, self.tokenizers, end, req.answer_note
        )
        memory = MemorySearch(self.memories, turn, log)
        # A ReAct addendum is made once per turn; every context leaves room for it.
        addendum = ReactAddendum.for_request(req) if req.react else None
        contexts = StepContexts(
            self.builder,
            self.max_prompt_tokens,
            req,
            turn,
            addendum.tokens if addendum else 0,
            REFUSED_SUBJECT if addendum else "the context",
            blank_user_turns=self.blank_user_turns,
            steps=record.kept,
        )
        if addendum is not None:
            return ReactTags(req, TurnParts(turn, record, log, contexts, memory), addendum)
        recall = None
        if req.offers_recall:
            recall = RecallToolResult(
                self.conversation, turn, log, req.tokenizer, req.editing, req.messages
            )
        return NativeTools(req, TurnParts(turn, record, log, contexts, memory, recall))


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnSetup:
    """Sets a turn up (``start``), up to its first model call."""

    sessions: SessionsApp
    conversation: ConversationRepo
    events: EventStore
    turns: SessionTurns
    kit: TurnKit
    provider: Provider  # named in the turn's first event and its session's log, never called
    warn_prompt_tokens: int

    async def start(
        self, req: ChatTurnRequest
    ) -> tuple[TurnStarted, ToolProtocol[Any], ModelRequest]:
        """Everything before the model is called; the turn's first event, its protocol
        and the first step's model request."""
        if not (req.session_id and self.turns.shared):
            return await self._begin(req, await self._session(req))
        # Claimed only for the caller's own session; the claim reads its row (PostgreSQL).
        caller = req.caller
        held = await self.turns.hold(caller.tenant_id, req.session_id, req.deadline, caller.user_id)
        try:
            session = held.session or await self._session(req)
            return await self._begin(req, session, held)
        except BaseException:
            # A turn that stored no input leaves nothing to close: the session is free.
            with contextlib.suppress(Exception):
                await self.turns.release(session.id)
            raise

    async def _begin(
        self, req: ChatTurnRequest, session: Session, held: Held = _NOT_HELD
    ) -> tuple[TurnStarted, ToolProtocol[Any], ModelRequest]:
        """``held``: read as the session's lease was taken: at the session's version the
        newest message (it numbers the turn) is the kept one when kept at it; whether the
        log is open needs no read of its last line when known. Ephemeral: no stored session."""
        continuing = bool(req.tool_results)
        history = []
        if req.session_id and not req.ephemeral:  # a session created now has no messages
            history = await self.conversation.tail(
                session.id, 1, req.tokenizer.name, tenant_id=session.tenant_id, version=held.version
            )
        if not req.ephemeral:
            # A session starts at its first turn (a new session's needs no read of its
            # log), and again at the first turn after it ended.
            session_log = SessionLog(self.events, session)
            if (not history and not continuing) or (
                not self.turns.log_known_open(session.id)
                and await session_log.needs_start(held.log_open)
            ):
                meta = req.log_meta(self.provider.name, self.provider.default_model)
                await session_log.start(meta)
            self.turns.log_open(session.id)
        index = max((history[-1].turn_index if history else 0) + (0 if continuing else 1), 1)
        model = req.model.model or self.provider.default_model
        turn = Turn(session, index, req.caller.user_id, req.tokenizer, req.user_message, model)
        tools = self.kit.tool_protocol(req, turn)
        record, log = tools.record, tools.log

        # The input (a user message, tool results, an observation) is built into the
        # context first, not stored yet, then stored: a turn refused for the prompt
        # limit stores nothing and can be sent again. Then the model is called.
        answered: list[ToolCall] = []
        user_message_id = ""
        if continuing:
            answered = await self._answered_calls(req, tools, session)
            await self._continue_turn(turn)
            context, user_message_id = await tools.take_host_results()
            input_tokens = sum(
                message_tokens(ChatMessage(Role.TOOL, content, tool_call_id=call_id), req.tokenizer)
                for call_id, content in req.tool_results
            )
            if user_message_id:
                user = ChatMessage(Role.USER, req.user_message, parts=req.user_parts)
                input_tokens += message_tokens(user, req.tokenizer)
        elif req.continues_host_list:
            # The host's list ends with the results of its own tool calls: the model's next
            # step, from that list alone; the new session stores no input of its own.
            context = await tools.contexts.for_user_message("")
            input_tokens = sum(message_tokens(m, req.tokenizer) for m in req.trailing_results)
        else:
            context = await tools.contexts.for_user_message(req.user_message, req.user_parts)
            # The session was read above: store directly, with token counts, and
            # turn_start with it (in its write where the log can join it).
            row = record.row(ChatMessage(Role.USER, req.user_message, parts=req.user_parts))
            input_tokens = row.tokens[req.tokenizer.name]
            if not req.ephemeral:
                meta = context_meta(context, tools.contexts.layers)
                starting = log.starting(req.user_message, input_tokens, False, meta)
                [stored] = await record.store([row], step=False, logged=starting)
                user_message_id = str(stored.id)
        request = tools.model_request(context)
        if continuing or not user_message_id:  # turn_start not written with the input
            meta = context_meta(context, tools.contexts.layers)
            await log.turn_start(req.user_message, input_tokens, continuing, meta)
        for call, (_, content) in zip(answered, req.tool_results, strict=True):
            # A result belongs to the step of its call, the one before this call's first.
            await log.observation(turn.step - 1, content, call.name, call.id)
        estimate = request.prompt_tokens_estimate
        started = TurnStarted(
            session.id,
            turn.index,
            user_message_id,
            estimate,
            estimate > self.warn_prompt_tokens,
            context.report,
            self.provider.name,
            model,
            tools.contexts.layers,
        )
        return started, tools, request

    async def _session(self, req: ChatTurnRequest) -> Session:
        if req.ephemeral:  # never stored: its id is ""
            caller = req.caller
            return Session("", caller.user_id, req.scenario, req.host, tenant_id=caller.tenant_id)
        if req.session_id:
            return await owned_session(self.sessions.sessions, req.caller, req.session_id)
        return await self.sessions.create(req.caller, req.scenario, req.host, req.title)

    async def _answered_calls(
        self, req: ChatTurnRequest, tools: ToolProtocol[Any], session: Session
    ) -> list[ToolCall]:
        """The calls the host's results answer, in their order: each must be a call that
        ended the previous turn and has no result yet."""
        recent = await self.conversation.tail(
            session.id, _RECENT_FOR_OPEN_CALLS, req.tokenizer.name, tenant_id=session.tenant_id
        )
        open_calls = tools.open_calls(recent)
        v = Violations()
        seen: set[str] = set()
        for k, (call_id, _) in enumerate(req.tool_results):
            if call_id not in open_calls or call_id in seen:
                v.add(f"tool_results[{k}].tool_call_id", "not a pending call of this session")
            seen.add(call_id)  # the same id twice in one request is refused too
        v.raise_if_any()
        return [open_calls[call_id] for call_id, _ in req.tool_results]

    async def _continue_turn(self, turn: Turn) -> None:
        """Pick up the turn the host's results continue: the user message that began it
        (its first user message; the turn's observations come after it), and its steps
        so far, one stored assistant message each (a step that did not end the turn
        stored its tool calls, the last one the calls the results answer)."""
        rows = await self.conversation.turn_messages(
            turn.session.id, turn.index, turn.tokenizer, tenant_id=turn.session.tenant_id
        )
        question = next((r.message.content for r in rows if r.message.role is Role.USER), "")
        # At least one: the calls answered are a step's.
        turn.continue_from(max(1, sum(r.message.role is Role.ASSISTANT for r in rows)), question)

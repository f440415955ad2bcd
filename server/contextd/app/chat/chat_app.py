"""StreamChat's use case: one chat turn, from the user's message to the stored answer."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import weakref
from collections.abc import AsyncGenerator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from opentelemetry.trace import Span

from contextd.app.after_turn import AfterTurnRunner
from contextd.app.chat.event_log import SessionLog, TurnLog, context_meta
from contextd.app.chat.events import (
    ChatEvent,
    DeltaEvent,
    ToolCallEvent,
    TurnStarted,
    TurnStatus,
    UsageEvent,
)
from contextd.app.chat.interrupted import InterruptedTurns
from contextd.app.chat.memory_tool import MEMORY_TOOL, MemorySearch
from contextd.app.chat.native_tools import NativeTools
from contextd.app.chat.react_tags import REFUSED_SUBJECT, ReactAddendum, ReactTags
from contextd.app.chat.recall_tool import RECALL_TOOL, RecallToolResult, offers_recall
from contextd.app.chat.recorder import TurnRecorder
from contextd.app.chat.request import ChatLimits, ChatTurnRequest, check_mode, validate
from contextd.app.chat.session_lease import hold_session
from contextd.app.chat.step_context import StepContexts
from contextd.app.chat.tool_protocol import (
    FinalAnswer,
    HostAction,
    ToolProtocol,
    ToolUse,
    TurnParts,
)
from contextd.app.chat.turn import Turn
from contextd.app.scope import Caller
from contextd.app.session_context import SessionContextBuilder
from contextd.app.sessions import SessionsApp
from contextd.core.errors import SessionNotFound, Violations
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.tokens import TokenizerRegistry, message_tokens
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.providers.base import (
    Finished,
    ModelEvent,
    ModelRequest,
    Provider,
    TextDelta,
    ToolCallReady,
    Usage,
)
from contextd.providers.errors import ProviderError, ProviderRateLimited
from contextd.store.conversation import ConversationRepo
from contextd.store.event_log.events import EventStore
from contextd.store.memory.repository import MemoryRepo
from contextd.store.models import Session
from contextd.store.partial_answers import Held, PartialAnswerRepo
from contextd.tracing import genai

# How far back a continuing turn looks for the calls the host's results answer.
_RECENT_FOR_OPEN_CALLS = 64
# A turn whose session holds no lease (SQLite): nothing read with one.
_NOT_HELD = Held(None)
# Sessions known to have an open event log, at most.
_LOGS_OPEN_KEPT = 16384


class ChatApp:
    """StreamChat's turns and EndSession's end of a session. ``sessions`` finds and
    creates the caller's sessions; the turn is stored in ``conversation``, logged in
    ``events`` and kept in ``partials`` while it streams; ``after_turn`` (when given) gets
    every turn that ends ok."""

    def __init__(
        self,
        *,
        sessions: SessionsApp,
        conversation: ConversationRepo,
        events: EventStore,
        partials: PartialAnswerRepo,
        tokenizers: TokenizerRegistry,
        builder: SessionContextBuilder,
        memories: MemoryRepo,
        provider: Provider,
        limits: ChatLimits,
        after_turn: AfterTurnRunner | None = None,
        metrics: Recorder = NULL_RECORDER,
    ) -> None:
        self._sessions = sessions
        self._conversation = conversation
        self._events = events
        self._partials = partials
        self._tokenizers = tokenizers
        self._builder = builder
        self._memories = memories
        self._provider = provider
        self._limits = limits
        self._after_turn = after_turn
        self._metrics = metrics
        self._interrupted = InterruptedTurns(partials, conversation, events, tokenizers)
        # Where the model calls go, for their spans (none for a provider in the process).
        self._model_server = genai.ModelServer.of(getattr(provider, "base_url", ""))
        # One turn at a time per session: a turn reads the history, numbers itself and
        # appends; two at once would share a turn index and interleave their messages.
        # Other processes sharing the database are held off by the session's lease
        # (session_lease.py), taken under this lock.
        self._session_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        # Sessions whose event log does not end with session_end, as this process knows
        # from its own turns (a turn never writes session_end; end_session forgets the
        # session first): their next turn needs no read of the log's last line. Only
        # where no other process writes the logs; emptied when full.
        self._logs_open: set[str] = set()

    def turn_running(self, session_id: str) -> bool:
        """Whether a turn of the session runs or waits for the one before it."""
        lock = self._session_locks.get(session_id)
        return lock is not None and lock.locked()

    async def close_interrupted_turns(self) -> int:
        """Before serving: close the turns a killed server left open (interrupted.py);
        how many were closed."""
        return await self._interrupted.close_left_behind()

    async def run(self, req: ChatTurnRequest) -> AsyncGenerator[ChatEvent, None]:
        """One turn as a stream of events. Errors before TurnStarted raise; later ones
        end the stream with a TurnCompleted whose status says what happened. Turns of
        one session run one after the other: in the order they arrived in this process,
        and not at once with another process's turn of it."""
        validate(req)
        lock: contextlib.AbstractAsyncContextManager[object] = contextlib.nullcontext()
        if req.session_id:
            lock = self._session_lock(req.session_id)
        # Every text delta passes each generator between the provider and the caller:
        # this one iterates the steps itself, and the steps the provider's stream.
        async with lock:
            started, tools, request = await self._start(req)
            record = tools.record
            try:
                yield started
                # aclosing: closed here (a GeneratorExit at the yield), the steps and the
                # provider's stream close before the partial answer is stored.
                steps = self._steps(tools, request)
                async with contextlib.aclosing(steps):
                    async for event in steps:
                        yield event
            except SessionNotFound:
                # Deleted while the turn ran: nothing more is stored, and the events the
                # turn logged after the deletion must not leave a log behind it.
                self._logs_open.discard(tools.turn.session.id)
                await asyncio.shield(SessionLog(self._events, tools.turn.session).delete())
                raise
            except BaseException as error:
                # A client cancel, a passed deadline or a bug: keep what was said, go on.
                cancelled = isinstance(error, asyncio.CancelledError | GeneratorExit)
                status = TurnStatus.CANCELLED if cancelled else TurnStatus.ERROR
                reason = (
                    "the call was cancelled or its deadline passed" if cancelled else repr(error)
                )
                if not record.completed:  # a close at the last event leaves nothing to store
                    await asyncio.shield(record.store_partial(status, reason))
                raise

    def _log_open(self, session_id: str) -> None:
        """The session's log now ends with this turn's lines, not with session_end."""
        if self._partials.turns_hold_leases:
            return  # another process may end the session
        if len(self._logs_open) >= _LOGS_OPEN_KEPT:
            self._logs_open.clear()
        self._logs_open.add(session_id)

    def _session_lock(self, session_id: str) -> asyncio.Lock:
        lock = self._session_locks.get(session_id) or asyncio.Lock()
        self._session_locks[session_id] = lock
        return lock

    async def end_session(
        self, caller: Caller, session_id: str, mode: str, deadline: float | None = None
    ) -> bool:
        """Write session_end, with ``mode`` and the session's configuration, unless the
        session's log already ends with it; whether it wrote. Waits for a running turn of
        the session, as its next turn would, so that the end comes after that turn."""
        v = Violations()
        check_mode(mode, "mode", v)
        v.raise_if_any()
        session = await self._sessions.get(caller, session_id)
        shared = self._partials.turns_hold_leases
        async with self._session_lock(session.id):
            if shared:
                await hold_session(self._partials, self._interrupted, session, deadline)
            try:
                self._logs_open.discard(session.id)
                log = SessionLog(self._events, session)
                if await log.ended():
                    return False
                await log.end(
                    {
                        "mode": mode or "session",
                        "provider": self._provider.name,
                        "scenario": session.scenario,
                        "host": session.host,
                        "title": session.title,
                        "metadata": session.metadata,
                    }
                )
                return True
            finally:
                if shared:
                    await asyncio.shield(self._partials.release(session.id))

    async def _start(
        self, req: ChatTurnRequest
    ) -> tuple[TurnStarted, ToolProtocol[Any], ModelRequest]:
        """Everything before the model is called: the session (held against other
        processes' turns of it, where they share the database), the context, the stored
        input, the turn's first events; the first step's model request."""
        session = await self._session(req)
        if not (req.session_id and self._partials.turns_hold_leases):
            return await self._begin(req, session)
        held = await hold_session(self._partials, self._interrupted, session, req.deadline)
        try:
            return await self._begin(req, session, held)
        except BaseException:
            # A turn that stored no input leaves nothing to close: the session is free.
            with contextlib.suppress(Exception):
                await asyncio.shield(self._partials.release(session.id))
            raise

    async def _begin(
        self, req: ChatTurnRequest, session: Session, held: Held = _NOT_HELD
    ) -> tuple[TurnStarted, ToolProtocol[Any], ModelRequest]:
        """``held``: what was read as the session's lease was taken: with the session's
        version, the newest message that numbers the turn is the kept one when kept at
        it; whether the log is open needs no read of its last line when known."""
        history = await self._conversation.tail(
            session.id, 1, req.tokenizer.name, tenant_id=session.tenant_id, version=held.version
        )
        continuing = bool(req.tool_results)
        index = max((history[-1].turn_index if history else 0) + (0 if continuing else 1), 1)
        turn = Turn(session, index, req.caller.user_id, req.tokenizer, req.user_message)
        # A session starts at its first turn (a new session's needs no read of its log),
        # and again at the first turn after it ended.
        session_log = SessionLog(self._events, session)
        if (not history and not continuing) or (
            session.id not in self._logs_open and await session_log.needs_start(held.log_open)
        ):
            await session_log.start(self._config_meta(req))
        self._log_open(session.id)
        tools = self._tool_protocol(req, turn)
        record, log = tools.record, tools.log

        # The input (a user message, tool results, an observation) is built into the
        # context first, not stored yet, then stored: a turn refused for the prompt
        # limit stores nothing and can be sent again. Then the model is called.
        answered: list[ToolCall] = []
        user_message_id = ""
        if continuing:
            answered = await self._answered_calls(req, tools, session)
            await self._continue_turn(turn)
            context = await tools.take_host_results()
            input_tokens = sum(
                message_tokens(ChatMessage(Role.TOOL, content, tool_call_id=call_id), req.tokenizer)
                for call_id, content in req.tool_results
            )
        elif req.continues_host_list:
            # The host's list ends with the results of its own tool calls: the model's next
            # step, from that list alone; the new session stores no input of its own.
            context = await tools.contexts.for_user_message("")
            input_tokens = sum(
                message_tokens(m, req.tokenizer) for m in _trailing_results(req.messages)
            )
        else:
            context = await tools.contexts.for_user_message(req.user_message, req.user_parts)
            # The session was read above: store directly, with token counts.
            row = record.row(ChatMessage(Role.USER, req.user_message, parts=req.user_parts))
            [stored] = await record.store([row])
            user_message_id = str(stored.id)
            input_tokens = row.tokens[req.tokenizer.name]
        request = tools.model_request(context)
        estimate = request.prompt_tokens_estimate
        await log.turn_start(
            req.user_message,
            input_tokens,
            continuing,
            context_meta(context, tools.contexts.layers),
        )
        for call, (_, content) in zip(answered, req.tool_results, strict=True):
            # A result belongs to the step of the call it answers, the one before this
            # call's first.
            await log.observation(turn.step - 1, content, call.name, call.id)
        started = TurnStarted(
            session.id,
            turn.index,
            user_message_id,
            estimate,
            estimate > self._limits.warn_prompt_tokens,
            context.report,
            self._provider.name,
            req.model.model or self._provider.default_model,
            tools.contexts.layers,
        )
        return started, tools, request

    async def _steps(
        self, tools: ToolProtocol[ToolUse], request: ModelRequest
    ) -> AsyncGenerator[ChatEvent, None]:
        """Model calls until an answer, a host tool call or the step limit; ``tools``
        reads what each step asks for."""
        turn, record = tools.turn, tools.record
        timed = False  # the first text delta of the call is timed
        while True:
            calls: list[ToolCall] = []
            # The model step, inline: a generator per step would be one more for every
            # text delta to pass.
            try:
                record.begin_step(request.prompt_tokens_estimate)
                step = turn.step
                started = time.perf_counter()
                failure: BaseException | None = None
                stream = self._provider.stream(request)
                with self._model_span(request) as span:
                    try:
                        async with contextlib.aclosing(stream):
                            async for model_event in stream:
                                if isinstance(model_event, TextDelta):
                                    if not timed:
                                        timed = True
                                        seconds = time.monotonic() - turn.started
                                        self._metrics.first_delta(seconds)
                                    turn.add_text(model_event.text)
                                    yield DeltaEvent(model_event.text, step)
                                else:
                                    event = _chat_event(turn, model_event, calls)
                                    if event is not None:
                                        yield event
                    except BaseException as error:
                        failure = error
                        raise
                    finally:
                        record.end_step(calls)
                        self._model_call_ended(turn, request, started, failure)
                        if span is not None:
                            _model_span_ended(span, turn, calls, failure)
            except ProviderError as error:
                yield await record.store_partial(TurnStatus.ERROR, _error_text(error))
                return
            await tools.log.assistant(turn.step, turn.step_text, turn.usage.step)
            outcome = tools.read_step(turn.step_text, calls)
            if isinstance(outcome, FinalAnswer):
                yield await record.answer(outcome.text, outcome.final_text)
                return
            if isinstance(outcome, HostAction):
                for event in await tools.require_action(outcome):
                    yield event
                return
            if turn.steps_this_call >= self._limits.max_steps:
                yield await tools.stop_at_step_limit(outcome)
                return
            answers = await tools.answer_inline(outcome)
            for event in answers.events:
                yield event
            turn.next_step()
            request = await tools.next_request(answers)

    def _model_span(self, request: ModelRequest) -> AbstractContextManager[Span | None]:
        return genai.model_call(
            self._provider.name,
            request.model or self._provider.default_model,
            self._model_server,
            max_tokens=request.max_output_tokens,
            temperature=request.temperature,
            messages=request.messages,
        )

    def _model_call_ended(
        self, turn: Turn, request: ModelRequest, started: float, failure: BaseException | None
    ) -> None:
        if not self._metrics.enabled:
            return
        usage = turn.usage.step
        self._metrics.model_call(
            self._provider.name,
            request.model or self._provider.default_model,
            time.perf_counter() - started,
            genai.error_type(failure),
            usage.prompt_tokens,
            usage.completion_tokens,
        )

    def _tool_protocol(self, req: ChatTurnRequest, turn: Turn) -> ToolProtocol[Any]:
        """The turn's way of offering tools, with the parts of the turn it works with: its
        event log, its recorder, its memory searches and its steps' contexts. (Any: the
        step loop never looks into a protocol's own reading of a step's tool use.)"""
        log = TurnLog(self._events, turn.session.id, turn.session.tenant_id, turn.index)
        record = TurnRecorder(
            turn,
            log,
            self._conversation,
            self._partials,
            self._tokenizers,
            self._after_turn,
            self._metrics,
            token_budget=req.prompt_budget(self._limits.max_prompt_tokens),
            compaction=req.compaction,
        )
        memory = MemorySearch(self._memories, turn, log)
        max_tokens = self._limits.max_prompt_tokens
        blank_user_turns = self._provider.capabilities.carries_blank_user_turns
        if not req.react:
            contexts = StepContexts(
                self._builder, max_tokens, req, turn, blank_user_turns=blank_user_turns
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
            blank_user_turns=blank_user_turns,
        )
        return ReactTags(req, TurnParts(turn, record, log, contexts, memory), addendum)

    async def _session(self, req: ChatTurnRequest) -> Session:
        if req.session_id:
            return await self._sessions.get(req.caller, req.session_id)
        return await self._sessions.create(req.caller, req.scenario, req.host, req.title)

    async def _answered_calls(
        self, req: ChatTurnRequest, tools: ToolProtocol[Any], session: Session
    ) -> list[ToolCall]:
        """The calls the host's results answer, in their order: each must be a call that
        ended the previous turn and has no result yet."""
        recent = await self._conversation.tail(
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
        rows = await self._conversation.turn_messages(
            turn.session.id, turn.index, turn.tokenizer, tenant_id=turn.session.tenant_id
        )
        question = next((r.message.content for r in rows if r.message.role is Role.USER), "")
        # At least one: the calls answered are a step's.
        turn.continue_from(max(1, sum(r.message.role is Role.ASSISTANT for r in rows)), question)

    def _config_meta(self, req: ChatTurnRequest) -> dict[str, object]:
        """session_start's meta: how the session runs, its model settings and which tools
        its turns offer (the host's, then the server's), so a log says what was on."""
        server_tools = [MEMORY_TOOL.name]
        if offers_recall(req.editing, req.react):
            server_tools.append(RECALL_TOOL.name)
        meta: dict[str, object] = {
            "mode": req.mode or ("prebuilt" if req.host_list_only else "session"),
            "provider": self._provider.name,
            "model": req.model.model or self._provider.default_model,
            "tokenizer": req.tokenizer.name,
        }
        if req.model.temperature is not None:
            # A float32 on the wire: 0.7 arrives as 0.699999988..., logged as sent.
            meta["temperature"] = round(req.model.temperature, 6)
        meta["tool_protocol"] = "react" if req.react else "native"
        meta["tools"] = [*(t.name for t in req.tools), *server_tools]
        return meta


def _trailing_results(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The tool messages that end ``messages``."""
    first = len(messages)
    while first and messages[first - 1].role is Role.TOOL:
        first -= 1
    return list(messages[first:])


def _chat_event(turn: Turn, event: ModelEvent, calls: list[ToolCall]) -> ChatEvent | None:
    """A model event other than text into the turn (tool calls into ``calls``); what the
    caller sees of it."""
    if isinstance(event, ToolCallReady):
        calls.append(event.call)
        return ToolCallEvent(event.call, turn.step)
    if isinstance(event, Usage):
        return UsageEvent(turn.take_usage(event, calls), turn.step)
    if isinstance(event, Finished):
        turn.finish_step(event)
    return None


def _model_span_ended(
    span: Span, turn: Turn, calls: list[ToolCall], failure: BaseException | None
) -> None:
    finish = turn.step_finish
    usage = turn.usage.step
    genai.model_call_ended(
        span,
        finish_reason=finish.reason if finish is not None else "",
        response_id=finish.response_id if finish is not None else "",
        response_model=finish.response_model if finish is not None else "",
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        text=turn.step_text,
        calls=calls,
        error_type=genai.error_type(failure),
    )


def _error_text(error: ProviderError) -> str:
    """The provider's error for the host, with the wait it asked for when it said."""
    text = str(error)
    if isinstance(error, ProviderRateLimited) and error.retry_after is not None:
        text += f"; retry after {math.ceil(error.retry_after)} s"
    return text

"""StreamChat: one chat turn, from the user's message to the stored answer.

A turn is one user input to a final answer; a step is one model call. The user
message (or the host's tool results) is stored before the model is called; the
assistant message when the turn ends, with a status when it ends early. Every
turn writes seed 003's events to the session's JSONL log.

Tools are offered natively (the provider's tool calling) or, for models without it,
with seed 003's ReAct tag protocol (``ChatTurnRequest.react``, see ``core.react``):
no native tools are sent, the system message gets the protocol addendum, and each
step's text is parsed. An ``<action>`` for memory_search (or for an unknown tool)
is answered server-side with an ``<observation>`` user message and the turn goes
on; one for a host tool ends the turn REQUIRES_ACTION with a ``react_<n>`` call
(n: the stored assistant message's id); ``<final>`` (or text with no tags) ends it.
Text deltas stream the model's raw text, tags included; the stored answer and
``final_text`` are the ``<final>`` content only.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import time
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from contextd.app.scope import Caller
from contextd.app.session_context import SessionBuildRequest, SessionContextBuilder
from contextd.app.sessions import SessionsApp
from contextd.core import react
from contextd.core.build import BuildReport, BuildRequest, BuildResult, build_messages
from contextd.core.errors import FailedPrecondition, Violations
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.pipeline import DropReason, is_blank
from contextd.core.tokens import Tokenizer, message_tokens
from contextd.providers.base import (
    ModelEvent,
    ModelRequest,
    Provider,
    TextDelta,
    ToolCallReady,
    ToolSpec,
    Usage,
)
from contextd.providers.errors import ProviderError, ProviderRateLimited
from contextd.store.events import EventLog, event_tokens
from contextd.store.memories import MemoryRepo
from contextd.store.models import NewMessage, Session, StoredMessage

log = logging.getLogger("contextd.chat")

MEMORY_TOOL = ToolSpec(
    name="memory_search",
    description="Search what is remembered about the user. Returns matching facts, best first.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "what to look for"}},
        "required": ["query"],
    },
)


class TurnStatus(StrEnum):
    OK = "ok"
    REQUIRES_ACTION = "requires_action"
    MAX_STEPS = "max_steps"
    CANCELLED = "cancelled"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class ChatLimits:
    max_prompt_tokens: int
    warn_prompt_tokens: int
    max_steps: int


@dataclass(frozen=True, slots=True)
class ModelOptions:
    model: str = ""
    temperature: float | None = None
    max_output_tokens: int | None = None
    stop: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class ChatTurnRequest:
    caller: Caller
    session_id: str  # "" starts a new session
    user_message: str
    tokenizer: Tokenizer
    scenario: str = ""
    host: str = ""
    variables: Mapping[str, str] = field(default_factory=dict)
    memory: bool | None = None
    # Prebuilt mode: the host's own list (system messages first, then history).
    messages: Sequence[ChatMessage] = ()
    tools: Sequence[ToolSpec] = ()
    tool_results: Sequence[tuple[str, str]] = ()  # (tool_call_id, content)
    token_budget: int = 0
    refuse_over_limit: bool = False
    model: ModelOptions = ModelOptions()
    title: str = ""
    # Seed 003's ReAct tag protocol instead of native tool calling.
    react: bool = False


@dataclass(slots=True)
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_estimate: int = 0

    def add(self, other: TokenUsage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.prompt_tokens_estimate += other.prompt_tokens_estimate


@dataclass(frozen=True, slots=True)
class TurnStarted:
    session_id: str
    turn_index: int
    user_message_id: str
    prompt_tokens_estimate: int
    prompt_tokens_warning: bool
    context: BuildReport
    provider: str
    model: str


@dataclass(frozen=True, slots=True)
class DeltaEvent:
    text: str
    step: int


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    call: ToolCall
    step: int


@dataclass(frozen=True, slots=True)
class UsageEvent:
    usage: TokenUsage
    step: int


@dataclass(frozen=True, slots=True)
class TurnCompleted:
    assistant_message_id: str
    final_text: str
    status: TurnStatus
    error_message: str
    step_usage: TokenUsage
    turn_usage: TokenUsage
    session_usage: TokenUsage
    duration_ms: int
    pending_tool_calls: Sequence[ToolCall] = ()


ChatEvent = TurnStarted | DeltaEvent | ToolCallEvent | UsageEvent | TurnCompleted


@dataclass(frozen=True, slots=True)
class _ReactAddendum:
    """A ReAct turn's system-prompt addendum, made once per turn, and the most tokens it
    adds to a prompt: the turn's context is fitted to the budget less these."""

    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class FinishedTurn:
    """A turn that completed with status ok: what background work after it needs."""

    session_id: str
    user_id: str
    turn_index: int
    tokenizer: str = ""  # the turn's tokenizer: the stored counts read with its messages


@dataclass(slots=True)
class _Turn:
    """What one turn has done so far; enough to store it whatever ends it."""

    session: Session
    index: int
    started: float
    tokenizer: str
    step: int = 0
    # The user message the turn answers, also when it goes on after tool results or an
    # observation: every step's memory layer searches with it.
    question: str = ""
    text: str = ""
    step_start: int = 0  # where the current step's text begins in ``text``
    usage: TokenUsage = field(default_factory=TokenUsage)
    step_usage: TokenUsage = field(default_factory=TokenUsage)
    step_counted: bool = True  # step_usage is in usage
    # The session's usage totals once the turn's usage is stored (with its answer).
    session_usage: TokenUsage | None = None
    completed: bool = False  # its TurnCompleted is made: nothing is left to store

    def count_step(self) -> None:
        """Add the current step's usage to the turn's, once."""
        if not self.step_counted:
            self.usage.add(self.step_usage)
            self.step_counted = True


class ChatApp:
    def __init__(
        self,
        sessions: SessionsApp,
        builder: SessionContextBuilder,
        memories: MemoryRepo,
        events: EventLog,
        provider: Provider,
        limits: ChatLimits,
        after_turn: Callable[[FinishedTurn], None] | None = None,
    ) -> None:
        self.sessions = sessions
        self.builder = builder
        self.memories = memories
        self.events = events
        self.provider = provider
        self.limits = limits
        self.after_turn = after_turn
        # One turn at a time per session: a turn reads the history, numbers itself and
        # appends; two at once would share a turn index and interleave their messages.
        self._session_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    async def run(self, req: ChatTurnRequest) -> AsyncGenerator[ChatEvent, None]:
        """One turn as a stream of events. Errors before TurnStarted raise; later ones
        end the stream with a TurnCompleted whose status says what happened. Turns of
        one session run one after the other, in the order they arrived."""
        _validate(req, self.limits)
        addendum = _react_addendum(req) if req.react else None
        lock: contextlib.AbstractAsyncContextManager[object] = contextlib.nullcontext()
        if req.session_id:
            lock = self._session_locks.get(req.session_id) or asyncio.Lock()
            self._session_locks[req.session_id] = lock
        # Every text delta passes each generator between the provider and the caller:
        # this one iterates the steps itself, and the steps the provider's stream.
        async with lock:
            started, turn, result = await self._start(req, addendum)
            try:
                yield started
                # aclosing: closed here (a GeneratorExit at the yield), the steps and the
                # provider's stream close before the partial answer is stored.
                steps = (
                    self._steps(req, turn, result)
                    if addendum is None
                    else self._react_steps(req, turn, result, addendum)
                )
                async with contextlib.aclosing(steps):
                    async for event in steps:
                        yield event
            except BaseException as error:
                # A client cancel, a passed deadline or a bug: keep what was said, go on.
                cancelled = isinstance(error, asyncio.CancelledError | GeneratorExit)
                status = TurnStatus.CANCELLED if cancelled else TurnStatus.ERROR
                reason = (
                    "the call was cancelled or its deadline passed" if cancelled else repr(error)
                )
                if not turn.completed:  # a close at the last event leaves nothing to store
                    turn.count_step()  # the prompt was sent all the same
                    await asyncio.shield(self._store_partial(req, turn, status, reason))
                raise

    async def _start(
        self, req: ChatTurnRequest, addendum: _ReactAddendum | None
    ) -> tuple[TurnStarted, _Turn, BuildResult]:
        """Everything before the model is called: the context, the stored input, the
        turn's first events. ``addendum``: a ReAct turn's."""
        session = await self._session(req)
        history = await self.sessions.conversation.tail(session.id, 1, req.tokenizer.name)
        continuing = bool(req.tool_results)
        index = (history[-1].turn_index if history else 0) + (0 if continuing else 1)
        turn = _Turn(session, max(index, 1), time.monotonic(), req.tokenizer.name)
        turn.question = req.user_message
        if not history and not continuing:
            await self._event(turn, "session_start", meta=self._config_meta(req))

        # The input (a user message, tool results, an observation) is built into the
        # context first, not stored yet, then stored: a turn refused for the prompt
        # limit stores nothing and can be sent again. Then the model is called.
        answered: list[ToolCall] = []
        if continuing:
            answered, results = await self._tool_results(req, session, turn)
            turn.question = await self._turn_question(session, turn.index, req.tokenizer)
        if continuing and req.react:
            # ReAct: the result is an <observation> user message, built like a user
            # message (not stored yet), then stored.
            [(_, content)] = req.tool_results
            observed = react.observation(content)
            result = await self._context(req, turn, False, addendum, user_message=observed)
            await self.sessions.conversation.append(
                session.id,
                req.caller.user_id,
                [self._row(turn, ChatMessage(Role.USER, observed))],
            )
        elif continuing:
            pending = [row.message for row in results]
            result = await self._context(req, turn, True, addendum, pending=pending)
            await self.sessions.conversation.append(session.id, req.caller.user_id, results)
        else:
            result = await self._context(req, turn, False, addendum)
        user_id = ""
        if not continuing:
            # The session was read above: store directly, with token counts.
            user_row = self._row(turn, ChatMessage(Role.USER, req.user_message))
            [stored] = await self.sessions.conversation.append(
                session.id, req.caller.user_id, [user_row]
            )
            user_id = str(stored.id)
        estimate = result.report.total_tokens
        if addendum is not None:
            _, estimate = _react_prompt(result, addendum, req.tokenizer)
        await self._event(
            turn,
            "turn_start",
            content=req.user_message,
            role="user",
            meta={"tokens": {"prompt": estimate}, "continuing": continuing},
        )
        for call, (_, content) in zip(answered, req.tool_results, strict=True):
            await self._event(
                turn,
                "observation",
                content=content,
                meta={"tool": call.name, "tool_call_id": call.id},
            )
        started = TurnStarted(
            session.id,
            turn.index,
            user_id,
            estimate,
            estimate > self.limits.warn_prompt_tokens,
            result.report,
            self.provider.name,
            req.model.model or self.provider.default_model,
        )
        return started, turn, result

    async def _steps(
        self, req: ChatTurnRequest, turn: _Turn, result: BuildResult
    ) -> AsyncGenerator[ChatEvent, None]:
        """Native tool calling: model calls until an answer, a host tool call or the
        step limit."""
        tools = [*req.tools, MEMORY_TOOL]
        while True:
            calls: list[ToolCall] = []
            request = self._model_request(req, result.messages, tools, result.report.total_tokens)
            # The model step, inline (as in _react_steps): a generator per step would be
            # one more for every text delta to pass.
            try:
                stream = self._begin_step(turn, request)
                try:
                    async with contextlib.aclosing(stream):
                        async for model_event in stream:
                            event = _chat_event(turn, model_event, calls)
                            if event is not None:
                                yield event
                finally:
                    turn.count_step()
            except ProviderError as error:
                yield await self._store_partial(req, turn, TurnStatus.ERROR, _error_text(error))
                return
            await self._end_step(turn)
            step_text = turn.text[turn.step_start :]
            server_side = [c for c in calls if c.name == MEMORY_TOOL.name]
            if not calls or len(server_side) < len(calls):
                yield await self._finish(req, turn, step_text, calls)
                return
            if turn.step + 1 >= self.limits.max_steps:
                yield await self._finish(req, turn, step_text, calls, TurnStatus.MAX_STEPS)
                return
            await self._run_memory_tools(req, turn, step_text, calls)
            turn.step += 1
            result = await self._context(req, turn, True, None)

    def _row(self, turn: _Turn, message: ChatMessage, status: str = "") -> NewMessage:
        """A message of this turn to store, with its token counts (the turn's tokenizer's
        among them: the next turn builds with it)."""
        return self.sessions.new_message(message, turn.index, status, turn.tokenizer)

    def _model_request(
        self,
        req: ChatTurnRequest,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        estimate: int,
    ) -> ModelRequest:
        return ModelRequest(
            messages=messages,
            model=req.model.model,
            temperature=req.model.temperature,
            max_output_tokens=req.model.max_output_tokens,
            stop=req.model.stop,
            tools=tools,
            prompt_tokens_estimate=estimate,
        )

    def _begin_step(self, turn: _Turn, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """Start a model call; iterate its stream with ``_chat_event``, then call
        ``turn.count_step()`` however it ends and ``_end_step`` when it ends well. A
        ProviderError propagates."""
        turn.step_usage = TokenUsage(prompt_tokens_estimate=request.prompt_tokens_estimate)
        turn.step_counted = False
        turn.step_start = len(turn.text)
        return self.provider.stream(request)

    async def _end_step(self, turn: _Turn) -> None:
        """Log the model call that just ended."""
        await self._event(
            turn,
            "assistant",
            step=turn.step,
            content=turn.text[turn.step_start :],
            role="assistant",
            meta={"tokens": _tokens(turn.step_usage)},
        )

    async def _react_steps(
        self, req: ChatTurnRequest, turn: _Turn, result: BuildResult, addendum: _ReactAddendum
    ) -> AsyncGenerator[ChatEvent, None]:
        """The ReAct loop: no native tools; each step's text is parsed for tags."""
        host_tools = {t.name for t in req.tools}
        while True:
            messages, estimate = _react_prompt(result, addendum, req.tokenizer)
            request = self._model_request(req, messages, (), estimate)
            try:
                stream = self._begin_step(turn, request)
                try:
                    async with contextlib.aclosing(stream):
                        async for model_event in stream:
                            event = _chat_event(turn, model_event, [])
                            if event is not None:
                                yield event
                finally:
                    turn.count_step()
            except ProviderError as error:
                yield await self._store_partial(req, turn, TurnStatus.ERROR, _error_text(error))
                return
            await self._end_step(turn)
            step_text = turn.text[turn.step_start :]
            parsed = react.parse_step(step_text)
            if not isinstance(parsed, react.Action):
                yield await self._react_final(req, turn, parsed.text)
                return
            if parsed.tool in host_tools:
                async for chat_event in self._react_host_action(req, turn, step_text, parsed):
                    yield chat_event
                return
            if turn.step + 1 >= self.limits.max_steps:
                message = ChatMessage(Role.ASSISTANT, step_text)
                status = TurnStatus.MAX_STEPS
                stored = await self._store_answer(req, turn, message, status.value)
                yield await self._complete(turn, stored, status, "", (), final_text="")
                return
            observed = ""
            async for item in self._react_server_action(req, turn, step_text, parsed):
                if isinstance(item, str):
                    observed = item
                else:
                    yield item
            turn.step += 1
            # The observation is the next step's user message: built, then stored.
            result = await self._context(req, turn, False, addendum, user_message=observed)
            await self.sessions.conversation.append(
                turn.session.id,
                req.caller.user_id,
                [self._row(turn, ChatMessage(Role.USER, observed))],
            )

    async def _react_final(self, req: ChatTurnRequest, turn: _Turn, answer: str) -> TurnCompleted:
        stored = await self._store_answer(req, turn, ChatMessage(Role.ASSISTANT, answer), "")
        await self._event(
            turn,
            "final",
            step=turn.step,
            content=answer,
            role="assistant",
            meta={"tokens": _tokens(turn.usage)},
        )
        return await self._complete(turn, stored, TurnStatus.OK, "", (), final_text=answer)

    async def _react_host_action(
        self, req: ChatTurnRequest, turn: _Turn, text: str, action: react.Action
    ) -> AsyncGenerator[ChatEvent, None]:
        """A host tool: store the step, end the turn waiting for the host's result."""
        stored = await self._store_answer(req, turn, ChatMessage(Role.ASSISTANT, text), "")
        assert stored is not None  # the text holds an <action> tag
        call = _react_call(stored.id, action)
        yield ToolCallEvent(call, turn.step)
        await self._event(
            turn,
            "action",
            step=turn.step,
            meta={"tool": call.name, "input": action.input, "tool_call_id": call.id},
        )
        status = TurnStatus.REQUIRES_ACTION
        yield await self._complete(turn, stored, status, "", (call,), final_text="")

    async def _react_server_action(
        self, req: ChatTurnRequest, turn: _Turn, text: str, action: react.Action
    ) -> AsyncGenerator[ChatEvent | str, None]:
        """memory_search (or a tool that does not exist): answered here; the last item
        is the observation user message's text."""
        stored = await self._store_assistant(req, turn, ChatMessage(Role.ASSISTANT, text), "")
        assert stored is not None
        meta: dict[str, object] = {"tool": action.tool, "input": action.input}
        if action.tool == MEMORY_TOOL.name:
            call = _react_call(stored.id, action)
            yield ToolCallEvent(call, turn.step)
            meta["tool_call_id"] = call.id
            await self._event(turn, "action", step=turn.step, meta=meta)
            query = react.query_of(action.input)
            found = await self.memories.search(req.caller.user_id, query, 5)
            result = "\n".join(f"- {m.memory.content}" for m in found) or "(nothing found)"
        else:
            await self._event(turn, "action", step=turn.step, meta=meta)
            known = [t.name for t in (*req.tools, MEMORY_TOOL)]
            result = react.unknown_tool(action.tool, known)
        await self._event(
            turn, "observation", step=turn.step, content=result, meta={"tool": action.tool}
        )
        yield react.observation(result)

    async def _run_memory_tools(
        self, req: ChatTurnRequest, turn: _Turn, text: str, calls: Sequence[ToolCall]
    ) -> None:
        """Store the call, run each memory search, store the results (as a host would)."""
        session_id = turn.session.id
        await self.sessions.conversation.append(
            session_id,
            req.caller.user_id,
            [self._row(turn, ChatMessage(Role.ASSISTANT, text, tuple(calls)))],
        )
        results = []
        for call in calls:
            query = _argument(call, "query")
            await self._event(
                turn, "action", step=turn.step, meta={"tool": call.name, "input": call.arguments}
            )
            found = await self.memories.search(req.caller.user_id, query, 5)
            observation = "\n".join(f"- {m.memory.content}" for m in found) or "(nothing found)"
            await self._event(
                turn, "observation", step=turn.step, content=observation, meta={"tool": call.name}
            )
            results.append(
                self._row(turn, ChatMessage(Role.TOOL, observation, tool_call_id=call.id))
            )
        await self.sessions.conversation.append(session_id, req.caller.user_id, results)

    async def _finish(
        self,
        req: ChatTurnRequest,
        turn: _Turn,
        text: str,
        calls: Sequence[ToolCall],
        status: TurnStatus | None = None,
    ) -> TurnCompleted:
        host_calls = [c for c in calls if c.name != MEMORY_TOOL.name]
        if status is None:
            status = TurnStatus.REQUIRES_ACTION if host_calls else TurnStatus.OK
        message = ChatMessage(Role.ASSISTANT, text, tuple(calls))
        stored = await self._store_answer(req, turn, message, "")
        if status is TurnStatus.REQUIRES_ACTION:
            # The host runs these; its results come back as the observations.
            for call in host_calls:
                await self._event(
                    turn,
                    "action",
                    step=turn.step,
                    meta={"tool": call.name, "input": call.arguments, "tool_call_id": call.id},
                )
        if not calls:
            await self._event(
                turn,
                "final",
                step=turn.step,
                content=text,
                role="assistant",
                meta={"tokens": _tokens(turn.usage)},
            )
        return await self._complete(turn, stored, status, "", host_calls)

    async def _store_partial(
        self, req: ChatTurnRequest, turn: _Turn, status: TurnStatus, error: str
    ) -> TurnCompleted:
        """Keep what the model said in the step that broke off, marked with its status
        (earlier steps' text is stored with their tool calls), unless the turn's answer
        was stored already and only its end is missing."""
        stored = None
        if turn.session_usage is None:
            message = ChatMessage(Role.ASSISTANT, turn.text[turn.step_start :])
            stored = await self._store_answer(req, turn, message, status.value)
        return await self._complete(turn, stored, status, error, ())

    async def _store_assistant(
        self, req: ChatTurnRequest, turn: _Turn, message: ChatMessage, status: str
    ) -> StoredMessage | None:
        if is_blank(message.content) and not message.tool_calls:
            return None
        new = self._row(turn, message, status)
        [stored] = await self.sessions.conversation.append(
            turn.session.id, req.caller.user_id, [new]
        )
        return stored

    async def _store_answer(
        self, req: ChatTurnRequest, turn: _Turn, message: ChatMessage, status: str
    ) -> StoredMessage | None:
        """The turn's last assistant message (none when it is blank) and its usage, in one
        transaction: the turn's last write but the event log's."""
        rows = []
        if not is_blank(message.content) or message.tool_calls:
            rows.append(self._row(turn, message, status))
        u = turn.usage
        stored, totals = await self.sessions.conversation.append_with_usage(
            turn.session.id,
            req.caller.user_id,
            rows,
            (u.prompt_tokens, u.completion_tokens, u.prompt_tokens_estimate),
        )
        turn.session_usage = TokenUsage(*totals)
        return stored[0] if stored else None

    async def _complete(
        self,
        turn: _Turn,
        stored: StoredMessage | None,
        status: TurnStatus,
        error: str,
        pending: Sequence[ToolCall],
        final_text: str | None = None,
    ) -> TurnCompleted:
        u = turn.usage
        totals = turn.session_usage
        assert totals is not None, "every turn stores its answer and usage before it ends"
        duration = int((time.monotonic() - turn.started) * 1000)
        meta: dict[str, object] = {
            "status": status.value,
            "stepCount": turn.step + 1,
            "durationMs": duration,
            "tokens": _tokens(u),
        }
        if error:
            meta["errorMessage"] = error
        await self._event(turn, "turn_end", meta=meta)
        if self.after_turn is not None and status is TurnStatus.OK:
            # Memory extraction and summaries run in the background: the completed
            # event does not wait for them.
            self.after_turn(
                FinishedTurn(turn.session.id, turn.session.user_id, turn.index, turn.tokenizer)
            )
        turn.completed = True
        return TurnCompleted(
            assistant_message_id=str(stored.id) if stored else "",
            final_text=turn.text if final_text is None else final_text,
            status=status,
            error_message=error,
            step_usage=turn.step_usage,
            turn_usage=u,
            session_usage=totals,
            duration_ms=duration,
            pending_tool_calls=tuple(pending),
        )

    async def _session(self, req: ChatTurnRequest) -> Session:
        if req.session_id:
            return await self.sessions.get(req.caller, req.session_id)
        return await self.sessions.create(req.caller, req.scenario, req.host, req.title)

    async def _context(
        self,
        req: ChatTurnRequest,
        turn: _Turn,
        continuing: bool,
        addendum: _ReactAddendum | None,
        user_message: str | None = None,
        pending: Sequence[ChatMessage] = (),
    ) -> BuildResult:
        """The context of the turn's next step. Session mode: ``user_message`` stands in
        for the request's (a ReAct observation), ``pending`` are the host's tool results
        (not stored yet) the history ends with, and the memory layer searches with the
        turn's question; prebuilt mode always builds from the host's list and message.
        A ReAct turn's context leaves room for its ``addendum``."""
        if user_message is None:
            user_message = "" if continuing else req.user_message
        budget = min(
            req.token_budget or self.limits.max_prompt_tokens, self.limits.max_prompt_tokens
        )
        # At least 1: an addendum as large as the budget leaves only the required parts,
        # over the budget (and so refused under the refuse policy).
        fitted = max(budget - addendum.tokens, 1) if addendum else budget
        if req.messages:
            result = _prebuilt(req, fitted)
        else:
            build = await self.builder.build(
                SessionBuildRequest(
                    caller=req.caller,
                    session_id=turn.session.id,
                    user_message=user_message,
                    token_budget=fitted,
                    tokenizer=req.tokenizer,
                    scenario=req.scenario,
                    host=req.host,
                    variables=req.variables,
                    memory=req.memory,
                    continuation=continuing,
                    pending=pending,
                    memory_query=turn.question,
                ),
                turn.session,
            )
            result = build.result
        if req.refuse_over_limit and _trimmed(result.report):
            what = "the context with the ReAct instructions" if addendum else "the context"
            raise FailedPrecondition(
                f"{what} does not fit max_prompt_tokens ({budget}); the turn was refused"
            )
        return result

    async def _turn_question(self, session: Session, turn_index: int, tok: Tokenizer) -> str:
        """The user message that began the turn: its first user message (the turn's
        observations come after it)."""
        rows = await self.sessions.conversation.turn_messages(session.id, turn_index, tok.name)
        return next((r.message.content for r in rows if r.message.role is Role.USER), "")

    async def _tool_results(
        self, req: ChatTurnRequest, session: Session, turn: _Turn
    ) -> tuple[list[ToolCall], list[NewMessage]]:
        """The host's results must answer the calls that ended the previous turn; returns
        the calls they answer, in their order, and the tool messages to store (none in
        ReAct mode, where the result becomes an observation)."""
        recent = await self.sessions.conversation.tail(session.id, 64, req.tokenizer.name)
        last = next(
            (k for k in range(len(recent) - 1, -1, -1) if recent[k].message.role is Role.ASSISTANT),
            None,
        )
        open_calls: dict[str, ToolCall] = {}
        answered: set[str] = set()
        if last is not None and req.react:
            # A ReAct answer has no native calls: its text names the pending one, open
            # while nothing was stored after it.
            row = recent[last]
            parsed = react.parse_step(row.message.content)
            if (
                isinstance(parsed, react.Action)
                and parsed.tool != MEMORY_TOOL.name
                and not row.status
                and last == len(recent) - 1
            ):
                call = _react_call(row.id, parsed)
                open_calls = {call.id: call}
        elif last is not None:
            # Host-side calls of the last answer; results stored since then answered some.
            calls = recent[last].message.tool_calls
            open_calls = {c.id: c for c in calls if c.name != MEMORY_TOOL.name}
            answered = {m.message.tool_call_id for m in recent[last + 1 :]}
        v = Violations()
        for k, (call_id, _) in enumerate(req.tool_results):
            if call_id not in open_calls or call_id in answered:
                v.add(f"tool_results[{k}].tool_call_id", "not a pending call of this session")
            answered.add(call_id)  # the same id twice in one request is refused too
        v.raise_if_any()
        answers = [open_calls[call_id] for call_id, _ in req.tool_results]
        if req.react:
            return answers, []
        rows = [
            self._row(turn, ChatMessage(Role.TOOL, content, tool_call_id=call_id))
            for call_id, content in req.tool_results
        ]
        return answers, rows

    async def _event(
        self,
        turn: _Turn,
        type: str,
        *,
        step: int | None = None,
        content: str | None = None,
        role: str | None = None,
        meta: dict[str, object] | None = None,
    ) -> None:
        turn_number = None if type == "session_start" else turn.index
        await self.events.append(
            turn.session.id,
            type,
            turn=turn_number,
            step=step,
            content=content,
            role=role,
            meta=meta,
        )

    def _config_meta(self, req: ChatTurnRequest) -> dict[str, object]:
        return {
            "mode": "prebuilt" if req.messages else "session",
            "provider": self.provider.name,
            "model": req.model.model or self.provider.default_model,
            "tokenizer": req.tokenizer.name,
        }


def _chat_event(turn: _Turn, event: ModelEvent, calls: list[ToolCall]) -> ChatEvent | None:
    """A model event into the turn (tool calls into ``calls``); what the caller sees of it."""
    if isinstance(event, TextDelta):
        turn.text += event.text
        return DeltaEvent(event.text, turn.step)
    if isinstance(event, ToolCallReady):
        calls.append(event.call)
        return ToolCallEvent(event.call, turn.step)
    if isinstance(event, Usage):
        turn.step_usage.prompt_tokens = event.prompt_tokens
        turn.step_usage.completion_tokens = event.completion_tokens
        return UsageEvent(turn.step_usage, turn.step)
    return None


def _validate(req: ChatTurnRequest, limits: ChatLimits) -> None:
    v = Violations()
    if req.tool_results and not req.session_id:
        v.add("session.session_id", "tool results continue a stored session: give its id")
    if req.tool_results and not is_blank(req.user_message):
        v.add("user_message", "send either a user message or tool results")
    if not req.tool_results and is_blank(req.user_message):
        v.add("user_message", "required")
    if req.token_budget < 0:
        v.add("token_budget", "must not be negative")
    for k, (call_id, _) in enumerate(req.tool_results):
        if not call_id:
            v.add(f"tool_results[{k}].tool_call_id", "required")
    names = set()
    for k, tool in enumerate(req.tools):
        if tool.name == MEMORY_TOOL.name or tool.name in names:
            v.add(f"tools[{k}].name", f"duplicate or reserved tool name {tool.name!r}")
        names.add(tool.name)
    if req.messages and req.tool_results:
        v.add("messages", "prebuilt messages cannot continue a stored turn")
    v.raise_if_any()


def _prebuilt(req: ChatTurnRequest, budget: int) -> BuildResult:
    """The host's own list: leading system messages are the system prompt."""
    systems = 0
    while systems < len(req.messages) and req.messages[systems].role is Role.SYSTEM:
        systems += 1
    return build_messages(
        BuildRequest(
            user_message=req.user_message,
            token_budget=budget,
            tokenizer=req.tokenizer,
            system_prompts=[m.content for m in req.messages[:systems]],
            history=req.messages[systems:],
        )
    )


def _trimmed(report: BuildReport) -> bool:
    return report.required_over_budget or any(d.reason is DropReason.BUDGET for d in report.dropped)


def _tokens(u: TokenUsage) -> dict[str, int]:
    prompt = u.prompt_tokens or u.prompt_tokens_estimate
    return event_tokens(prompt, u.completion_tokens)


def _error_text(error: ProviderError) -> str:
    """The provider's error for the host, with the wait it asked for when it said."""
    text = str(error)
    if isinstance(error, ProviderRateLimited) and error.retry_after is not None:
        text += f"; retry after {math.ceil(error.retry_after)} s"
    return text


def _argument(call: ToolCall, name: str) -> str:
    try:
        value = json.loads(call.arguments or "{}").get(name, "")
    except (ValueError, AttributeError):
        return ""
    return str(value)


def _react_addendum(req: ChatTurnRequest) -> _ReactAddendum:
    tools = [react.ReactTool(t.name, t.description, t.parameters) for t in req.tools]
    memory = react.ReactTool(MEMORY_TOOL.name, MEMORY_TOOL.description, MEMORY_TOOL.parameters)
    text = react.addendum([*tools, memory])
    tok = req.tokenizer
    # Appended to the system message after a blank line, or a system message of its own
    # when there is none (see _with_addendum).
    tokens = max(tok.count("\n\n" + text), tok.message_overhead + tok.count(text))
    return _ReactAddendum(text, tokens)


def _react_prompt(
    result: BuildResult, addendum: _ReactAddendum, tok: Tokenizer
) -> tuple[list[ChatMessage], int]:
    """A ReAct step's messages (the context with the addendum) and their token count."""
    messages = _with_addendum(result.messages, addendum.text)
    report = result.report
    # The system message is the only one the addendum changes: count it again.
    return messages, report.total_tokens - report.system_tokens + message_tokens(messages[0], tok)


def _with_addendum(messages: Sequence[ChatMessage], extra: str) -> list[ChatMessage]:
    """The addendum at the end of the system message (a new one when there is none)."""
    if messages and messages[0].role is Role.SYSTEM:
        first = messages[0]
        content = f"{first.content}\n\n{extra}" if not is_blank(first.content) else extra
        return [dataclasses.replace(first, content=content), *messages[1:]]
    return [ChatMessage(Role.SYSTEM, extra), *messages]


def _react_call(message_id: int, action: react.Action) -> ToolCall:
    """The tool call a ReAct action stands for; its id names the stored step."""
    return ToolCall(f"react_{message_id}", action.tool, react.tool_arguments(action.input))

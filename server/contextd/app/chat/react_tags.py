"""Tools offered with the ReAct tag protocol (``core.react``), for models without
native tool calling."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from contextd.app.chat.events import ChatEvent, ToolCallEvent, TurnCompleted, TurnStatus
from contextd.app.chat.inline_tools import MEMORY_TOOL
from contextd.app.chat.request import ChatTurnRequest
from contextd.app.chat.tool_protocol import (
    FinalAnswer,
    HostAction,
    InlineAction,
    InlineAnswers,
    StepOutcome,
    ToolProtocol,
    TurnParts,
)
from contextd.core import react
from contextd.core.build_request import BuildResult
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.pipeline import is_blank
from contextd.core.tokens import Tokenizer, message_tokens
from contextd.providers.base import ModelRequest
from contextd.store.models import StoredMessage

# What does not fit when a ReAct turn is refused for its size.
REFUSED_SUBJECT = "the context with the ReAct instructions"


@dataclass(frozen=True, slots=True)
class ReactAddendum:
    """A ReAct turn's system-prompt addendum, made once per turn, and the most tokens it
    adds to a prompt: the turn's contexts are fitted to the budget less these."""

    text: str
    tokens: int

    @classmethod
    def for_request(cls, req: ChatTurnRequest) -> ReactAddendum:
        tools = [react.ReactTool(t.name, t.description, t.parameters) for t in req.tools]
        memory = react.ReactTool(MEMORY_TOOL.name, MEMORY_TOOL.description, MEMORY_TOOL.parameters)
        text = react.addendum([*tools, memory])
        tok = req.tokenizer
        # Appended to the system message after a blank line, or a system message of its
        # own when there is none (see _with_addendum).
        tokens = max(tok.count("\n\n" + text), tok.message_overhead + tok.count(text))
        return cls(text, tokens)


class ReactTags(ToolProtocol[react.Action]):
    """No native tools are sent: the system message gets the protocol addendum and each
    step's text is parsed. An ``<action>`` for memory_search (or for an unknown tool) is
    answered here with an ``<observation>`` user message and the turn goes on; one for
    a host tool ends the turn with a ``react_<n>`` call (n: the stored assistant
    message's id), whose result comes back as the observation; ``<final>`` (or text
    with no tags) ends it. Text deltas stream the model's raw text, tags included; the
    stored answer and ``final_text`` are the ``<final>`` content only."""

    def __init__(self, req: ChatTurnRequest, parts: TurnParts, addendum: ReactAddendum) -> None:
        super().__init__(req, parts)
        self._addendum = addendum
        self._host_tools = {t.name for t in req.tools}

    def model_request(self, context: BuildResult) -> ModelRequest:
        messages, estimate = _prompt(context, self._addendum, self.req.tokenizer)
        # A system message the addendum added moves the rest one on.
        added = len(messages) - len(context.messages)
        return self._model_request(messages, (), estimate, context.stable_end + added)

    def open_calls(self, recent: Sequence[StoredMessage]) -> Mapping[str, ToolCall]:
        # A ReAct answer has no native calls: its text names the pending one, open while
        # nothing was stored after it.
        if not recent:
            return {}
        row = recent[-1]
        if row.message.role is not Role.ASSISTANT or row.status:
            return {}
        parsed = react.parse_step(row.message.content)
        if not isinstance(parsed, react.Action) or parsed.tool == MEMORY_TOOL.name:
            return {}
        call = _call(row.seq, parsed)
        return {call.id: call}

    async def take_host_results(self) -> tuple[BuildResult, str]:
        [(_, content)] = self.req.tool_results  # a ReAct step makes one call at most
        return await self._observe(content), ""

    def read_step(self, text: str, calls: Sequence[ToolCall]) -> StepOutcome[react.Action]:
        parsed = react.parse_step(text)
        if not isinstance(parsed, react.Action):
            return FinalAnswer(parsed.text, parsed.text)
        if parsed.tool in self._host_tools:
            return HostAction(text, parsed)
        return InlineAction(text, parsed)

    async def require_action(self, action: HostAction[react.Action]) -> Sequence[ChatEvent]:
        """Store the step; its call is named after the stored message."""
        turn, record = self.turn, self.record
        stored = await record.store_answer(ChatMessage(Role.ASSISTANT, action.text))
        assert stored is not None  # the text holds an <action> tag
        call = _call(stored.seq, action.tool_use)
        await self.log.action(turn.step, call.name, action.tool_use.input, call.id)
        status = TurnStatus.REQUIRES_ACTION
        completed = await record.end.complete(stored, status, "", pending=(call,))
        return ToolCallEvent(call, turn.step), completed

    async def stop_at_step_limit(self, action: InlineAction[react.Action]) -> TurnCompleted:
        status = TurnStatus.MAX_STEPS
        message = ChatMessage(Role.ASSISTANT, action.text)
        return await self.record.finish(message, status, "", message_status=status.value)

    async def answer_inline(self, action: InlineAction[react.Action]) -> InlineAnswers:
        """memory_search, or an error naming the tools for a tool that does not exist."""
        turn, used = self.turn, action.tool_use
        stored = await self.record.store_step(ChatMessage(Role.ASSISTANT, action.text))
        assert stored is not None  # a ReAct turn is never ephemeral (request.validate)
        if used.tool == MEMORY_TOOL.name:
            call = _call(stored.seq, used)
            query = react.query_of(used.input)
            result = await self.memory.answer(query, used.input, call.id, logged_call_id=call.id)
            return InlineAnswers((ToolCallEvent(call, turn.step),), (result,))
        await self.log.action(turn.step, used.tool, used.input)
        known = [t.name for t in (*self.req.tools, MEMORY_TOOL)]
        result = react.unknown_tool(used.tool, known)
        await self.log.observation(turn.step, result, used.tool)
        return InlineAnswers((), (result,))

    async def next_request(self, answers: InlineAnswers) -> ModelRequest:
        [result] = answers.results
        return self.model_request(await self._observe(result))

    async def _observe(self, result: str) -> BuildResult:
        """A tool's result as the next step's ``<observation>`` user message: built into
        the context like a user message, then stored."""
        observed = react.observation(result)
        context = await self.contexts.for_user_message(observed)
        await self.record.store([self.record.row(ChatMessage(Role.USER, observed))])
        return context


def _prompt(
    context: BuildResult, addendum: ReactAddendum, tok: Tokenizer
) -> tuple[list[ChatMessage], int]:
    """A step's messages (the context with the addendum) and their token count."""
    messages = _with_addendum(context.messages, addendum.text)
    # The first system message is the only one the addendum changes: count it again.
    first = context.message_tokens[0] if len(messages) == len(context.messages) else 0
    return messages, context.report.total_tokens - first + message_tokens(messages[0], tok)


def _with_addendum(messages: Sequence[ChatMessage], extra: str) -> list[ChatMessage]:
    """The addendum at the end of the system message (a new one when there is none)."""
    if messages and messages[0].role is Role.SYSTEM:
        first = messages[0]
        content = f"{first.content}\n\n{extra}" if not is_blank(first.content) else extra
        return [dataclasses.replace(first, content=content), *messages[1:]]
    return [ChatMessage(Role.SYSTEM, extra), *messages]


def _call(seq: int, action: react.Action) -> ToolCall:
    """The tool call a ReAct action stands for; its id names the stored step by its place
    in the session (a message's row number is not for callers to see)."""
    return ToolCall(f"react_{seq}", action.tool, react.tool_arguments(action.input))

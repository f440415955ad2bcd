"""Tools offered with the provider's own tool calling."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from contextd.app.chat.events import ChatEvent, TurnCompleted, TurnStatus
from contextd.app.chat.inline_tools import MEMORY_TOOL, RECALL_TOOL
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
from contextd.core import json_text
from contextd.core.build_request import BuildResult
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.pipeline import is_blank
from contextd.providers.base import ModelRequest, ToolSpec
from contextd.store.models import StoredMessage

StepCalls = tuple[ToolCall, ...]


class NativeTools(ToolProtocol[StepCalls]):
    """Every step is sent the host's tools, ``memory_search`` and, when the turn edits
    its context, ``recall_tool_result``; the model's calls stream as they come. A step
    whose calls are all of those server tools is answered here: the calls and their
    results are stored as tool messages and the turn goes on. A call of a host tool ends
    the turn; the host's results come back as tool messages."""

    def __init__(self, req: ChatTurnRequest, parts: TurnParts) -> None:
        super().__init__(req, parts)
        server_tools: tuple[ToolSpec, ...] = ()
        # Not in a turn that must call a host tool (a server tool would answer that), nor
        # in one whose context is the host's own list (no memories to search).
        if not (req.prebuilt or req.tool_choice.forces_call):
            server_tools = (MEMORY_TOOL,) if parts.recall is None else (MEMORY_TOOL, RECALL_TOOL)
        self._tools = (*req.tools, *server_tools)
        self._server_tools = frozenset(t.name for t in server_tools)

    def model_request(self, context: BuildResult) -> ModelRequest:
        return self._model_request(
            context.messages, self._tools, context.report.total_tokens, context.stable_end
        )

    def open_calls(self, recent: Sequence[StoredMessage]) -> Mapping[str, ToolCall]:
        last = next(
            (k for k in range(len(recent) - 1, -1, -1) if recent[k].message.role is Role.ASSISTANT),
            None,
        )
        if last is None:
            return {}
        # The host-side calls of the last answer, less those results stored since answered.
        answered = {m.message.tool_call_id for m in recent[last + 1 :]}
        return {
            c.id: c
            for c in recent[last].message.tool_calls
            if c.name not in self._server_tools and c.id not in answered
        }

    async def take_host_results(self) -> tuple[BuildResult, str]:
        record, req = self.record, self.req
        rows = [
            record.row(ChatMessage(Role.TOOL, content, tool_call_id=call_id))
            for call_id, content in req.tool_results
        ]
        results = [row.message for row in rows]
        if is_blank(req.user_message) and not req.user_parts:
            context = await self.contexts.for_continuation(results)
            await record.store(rows)
            return context, ""
        # Text beside the results: the model sees it after them, as it is stored.
        context = await self.contexts.for_user_message(
            req.user_message, req.user_parts, pending=results
        )
        user = record.row(ChatMessage(Role.USER, req.user_message, parts=req.user_parts))
        stored = await record.store([*rows, user])
        return context, str(stored[-1].id)

    def read_step(self, text: str, calls: Sequence[ToolCall]) -> StepOutcome[StepCalls]:
        if not calls:
            # The turn's answer is all its steps' text.
            return FinalAnswer(text, self.turn.text)
        if any(c.name not in self._server_tools for c in calls):
            return HostAction(text, tuple(calls))
        return InlineAction(text, tuple(calls))

    async def require_action(self, action: HostAction[StepCalls]) -> Sequence[ChatEvent]:
        """The step's calls were streamed already; the host runs those of its tools."""
        turn, record = self.turn, self.record
        host_calls = [c for c in action.tool_use if c.name not in self._server_tools]
        message = ChatMessage(Role.ASSISTANT, action.text, action.tool_use)
        stored = await record.store_answer(message)
        for call in host_calls:
            await self.log.action(turn.step, call.name, call.arguments, call.id)
        status = TurnStatus.REQUIRES_ACTION
        return (await record.end.complete(stored, status, turn.text, pending=host_calls),)

    async def stop_at_step_limit(self, action: InlineAction[StepCalls]) -> TurnCompleted:
        record = self.record
        message = ChatMessage(Role.ASSISTANT, action.text, action.tool_use)
        return await record.finish(message, TurnStatus.MAX_STEPS, self.turn.text)

    async def answer_inline(self, action: InlineAction[StepCalls]) -> InlineAnswers:
        """Store the calls, run each server tool, store the results (as a host would)."""
        record = self.record
        await record.store_step(ChatMessage(Role.ASSISTANT, action.text, action.tool_use))
        results: list[str] = []
        for call in action.tool_use:
            # The action is logged without the call's id (a ReAct search's has it).
            if call.name == RECALL_TOOL.name and self.recall is not None:
                wanted = _argument(call, "tool_call_id")
                results.append(await self.recall.answer(wanted, call.arguments, call.id))
                continue
            query = _argument(call, "query")
            results.append(await self.memory.answer(query, call.arguments, call.id))
        await record.store(
            [
                record.row(ChatMessage(Role.TOOL, result, tool_call_id=call.id))
                for call, result in zip(action.tool_use, results, strict=True)
            ]
        )
        return InlineAnswers((), results)

    async def next_request(self, answers: InlineAnswers) -> ModelRequest:
        # The results are stored: the history the context is built from ends with them.
        return self.model_request(await self.contexts.for_continuation())


def _argument(call: ToolCall, name: str) -> str:
    try:
        value = json_text.loads(call.arguments or "{}").get(name, "")
    except (ValueError, AttributeError):
        return ""
    return str(value)

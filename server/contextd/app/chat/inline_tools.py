"""The tools a turn answers itself, within the turn, instead of the host: ``memory_search``
(what is remembered about the user) and ``recall_tool_result`` (a cleared tool result
fetched back)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextd.app.chat.event_log import TurnLog
from contextd.app.chat.turn import Turn
from contextd.app.scope import session_memories
from contextd.core.editing import EditingSettings
from contextd.core.editing.capping import cap_text
from contextd.core.messages import ChatMessage, Role
from contextd.core.tokens import Tokenizer
from contextd.providers.base import ToolSpec
from contextd.store.conversation import ConversationRepo
from contextd.store.memory.repository import MemoryRepo
from contextd.tracing import genai

# The server-side ``memory_search`` tool: offered with the host's tools in either tool
# protocol, and answered within the turn instead of by the host.
MEMORY_TOOL = ToolSpec(
    name="memory_search",
    description="Search what is remembered about the user. Returns matching facts, best first.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "what to look for"}},
        "required": ["query"],
    },
)
MEMORY_RESULTS = 5  # the facts one search returns, at most


@dataclass(frozen=True, slots=True)
class MemorySearch:
    """Answers a turn's memory searches from the user's remembered facts."""

    _memories: MemoryRepo
    _turn: Turn
    _log: TurnLog

    async def answer(
        self, query: str, tool_input: str, call_id: str, *, logged_call_id: str | None = None
    ) -> str:
        """Search for ``query`` (the model's call ``call_id``, ``tool_input`` its input);
        the action (with ``logged_call_id``, when given) and the observation go to the
        event log. Returns the observation: one fact a line."""
        with genai.tool_call(MEMORY_TOOL.name, call_id):
            return await self._answer(query, tool_input, logged_call_id)

    async def _answer(self, query: str, tool_input: str, logged_call_id: str | None) -> str:
        turn, log = self._turn, self._log
        await log.action(turn.step, MEMORY_TOOL.name, tool_input, logged_call_id)
        found = await self._memories.search(
            turn.user_id,
            query,
            MEMORY_RESULTS,
            tenant_id=turn.session.tenant_id,
            memory_filter=session_memories(turn.session.host),
        )
        observation = "\n".join(f"- {m.memory.content}" for m in found) or "(nothing found)"
        await log.observation(turn.step, observation, MEMORY_TOOL.name)
        return observation


# The server-side ``recall_tool_result`` tool: a cleared tool result fetched back.
#
# Editing (core/editing) clears old tool results from the context, never from the store.
# When a turn edits its context, the model is offered this tool with native tool calling
# (ChatTurnRequest.offers_recall): given the call id a placeholder names, it answers the
# result as stored in the turn's session (or as the host sent it in prebuilt mode), capped
# as the turn caps results. Only the turn's own session is read, and the session is the
# caller's. ReAct observations are user messages, which editing leaves alone: the tool is
# not offered there.
RECALL_TOOL = ToolSpec(
    name="recall_tool_result",
    description=(
        "Fetch back a tool result that was cleared from the conversation to save context "
        "(it reads '[tool result cleared to save context: <tool>, call <id>, ...]'). "
        "Give the call id."
    ),
    parameters={
        "type": "object",
        "properties": {
            "tool_call_id": {"type": "string", "description": "the id of the tool call"}
        },
        "required": ["tool_call_id"],
    },
)
# Stored messages read at first when looking for a result; grows 4x while not found.
_FIRST_READ = 256


@dataclass(frozen=True, slots=True)
class RecallToolResult:
    """Answers a turn's recalls from its session's stored tool results."""

    _conversation: ConversationRepo
    _turn: Turn
    _log: TurnLog
    _tokenizer: Tokenizer
    _editing: EditingSettings
    _prebuilt: Sequence[ChatMessage] = ()

    async def answer(self, tool_call_id: str, tool_input: str, call_id: str) -> str:
        """The result of the call ``tool_call_id`` (the model's call ``call_id``,
        ``tool_input`` its input); the action and the observation go to the event log."""
        with genai.tool_call(RECALL_TOOL.name, call_id):
            turn, log = self._turn, self._log
            await log.action(turn.step, RECALL_TOOL.name, tool_input)
            found = await self._find(tool_call_id) if tool_call_id else None
            if found is None:
                result = f"no tool result with call id {tool_call_id!r} in this conversation"
            else:
                cap = self._editing.cap_tokens
                capped = cap_text(found, cap, self._tokenizer) if cap > 0 else None
                result = found if capped is None else capped
            await log.observation(turn.step, result, RECALL_TOOL.name)
            return result

    async def _find(self, tool_call_id: str) -> str | None:
        for m in reversed(self._prebuilt):
            if m.role is Role.TOOL and m.tool_call_id == tool_call_id:
                return m.content
        if self._turn.ephemeral:
            return None  # nothing of it is stored: the host's list is all there is
        session = self._turn.session
        limit = _FIRST_READ
        while True:
            rows = await self._conversation.tail(
                session.id, limit, self._tokenizer.name, tenant_id=session.tenant_id
            )
            for row in reversed(rows):
                m = row.message
                if m.role is Role.TOOL and m.tool_call_id == tool_call_id:
                    return m.content
            if len(rows) < limit:
                return None
            limit *= 4

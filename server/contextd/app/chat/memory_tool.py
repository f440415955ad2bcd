"""The server-side ``memory_search`` tool: offered with the host's tools in either tool
protocol, and answered within the turn instead of by the host."""

from __future__ import annotations

from contextd.app.chat.event_log import TurnLog
from contextd.app.chat.turn import Turn
from contextd.app.scope import session_memories
from contextd.providers.base import ToolSpec
from contextd.store.memory.repository import MemoryRepo
from contextd.tracing import genai

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


class MemorySearch:
    """Answers a turn's memory searches from the user's remembered facts."""

    def __init__(self, memories: MemoryRepo, turn: Turn, log: TurnLog) -> None:
        self._memories = memories
        self._turn = turn
        self._log = log

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

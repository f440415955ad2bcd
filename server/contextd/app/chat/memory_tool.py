"""The server-side ``memory_search`` tool: offered with the host's tools in either tool
protocol, and answered within the turn instead of by the host."""

from __future__ import annotations

from collections.abc import Mapping

from contextd.app.chat.turn import Turn
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

    def __init__(self, memories: MemoryRepo, turn: Turn) -> None:
        self._memories = memories
        self._turn = turn

    async def answer(self, query: str, action: Mapping[str, object], call_id: str) -> str:
        """Search for ``query`` (the model's call ``call_id``); the action (``action``: its
        event's details) and the observation go to the event log. Returns the
        observation: one fact a line."""
        with genai.tool_call(MEMORY_TOOL.name, call_id):
            return await self._answer(query, action)

    async def _answer(self, query: str, action: Mapping[str, object]) -> str:
        turn = self._turn
        await turn.event("action", step=turn.step, meta=dict(action))
        found = await self._memories.search(
            turn.user_id, query, MEMORY_RESULTS, tenant_id=turn.session.tenant_id
        )
        observation = "\n".join(f"- {m.memory.content}" for m in found) or "(nothing found)"
        await turn.event(
            "observation", step=turn.step, content=observation, meta={"tool": MEMORY_TOOL.name}
        )
        return observation

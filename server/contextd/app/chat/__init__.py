"""StreamChat: one chat turn, from the user's message to the stored answer.

A turn is one user input to a final answer; a step is one model call. The user
message (or the host's tool results) is stored before the model is called; the
assistant message when the turn ends, with a status when it ends early. Every turn
writes its events (turn start, each model call, actions and observations, the final
answer, turn end) to the session's JSONL log.

Where things are:

- ``chat_app``: ``ChatApp.run``, the turn's start and its one step loop, and
  ``ChatApp.end_session``;
- ``turn``: one turn's state (its steps, the text they streamed) and its usage,
  accounted per step, turn and session; changed through their methods;
- ``recorder``: the turn as it is stored (its input, its steps, its answer and usage)
  and its end; ``partial_writer``: the streaming step's text, saved once a second;
- ``event_log``: the lines a session and its turns write to the session's event log;
- ``tool_protocol``: how a turn offers tools, the strategy the loop asks after each
  step; ``native_tools`` (the provider's tool calling) and ``react_tags`` (the ReAct
  tag protocol of ``core.react``, for models without it) implement it;
- ``memory_tool``: the server-side ``memory_search`` tool both protocols answer inline;
- ``step_context``: the context each step is sent;
- ``interrupted`` and ``session_lease``: the turns a process's end cut off, closed at
  the next start or by the session's next turn, and one turn at a time per session
  across the processes that share a database;
- ``events`` and ``request``: what a turn reports and what it is asked.
"""

from contextd.app.chat.chat_app import ChatApp
from contextd.app.chat.events import (
    ChatEvent,
    DeltaEvent,
    ToolCallEvent,
    TurnCompleted,
    TurnStarted,
    TurnStatus,
    UsageEvent,
)
from contextd.app.chat.memory_tool import MEMORY_TOOL
from contextd.app.chat.request import ChatLimits, ChatTurnRequest, ModelOptions
from contextd.app.chat.turn import TokenUsage
from contextd.providers.base import AUTO, TEXT, ResponseFormat, ToolChoice, ToolSpec

__all__ = [
    "AUTO",
    "MEMORY_TOOL",
    "TEXT",
    "ChatApp",
    "ChatEvent",
    "ChatLimits",
    "ChatTurnRequest",
    "DeltaEvent",
    "ModelOptions",
    "ResponseFormat",
    "TokenUsage",
    "ToolCallEvent",
    "ToolChoice",
    "ToolSpec",
    "TurnCompleted",
    "TurnStarted",
    "TurnStatus",
    "UsageEvent",
]

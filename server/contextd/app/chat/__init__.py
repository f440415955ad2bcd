"""StreamChat: one chat turn, from the user's message to the stored answer.

A turn is one user input to a final answer; a step is one model call. The user
message (or the host's tool results) is stored before the model is called; the
assistant message when the turn ends, with a status when it ends early. Every turn
writes its events (turn start, each model call, actions and observations, the final
answer, turn end) to the session's JSONL log. An ephemeral turn stores and logs
nothing: the host's list, run in memory.

Where things are:

- ``chat_app``: ``ChatApp.run``, a turn through its phases: ``turn_setup`` (the
  session, its lease, the input stored; its ``TurnKit`` makes the turn's parts) and
  ``step_loop`` (the model calls, tools answered inline); a session's end is the
  sessions app's (app/sessions.py);
- ``turn``: one turn's state (its steps, the text they streamed) and its usage,
  accounted per step, turn and session; changed through their methods;
- ``recorder``: the turn as it is stored (its input, its steps, its answer and usage,
  and the streaming step's text, saved once a second); ``ephemeral``: the recorder of a
  turn that stores nothing; ``turn_end``: its end (logged, counted, handed to the
  after-turn work);
- ``event_log``: the lines a session and its turns write to the session's event log;
- ``tool_protocol``: how a turn offers tools, the strategy the loop asks after each
  step; ``native_tools`` (the provider's tool calling) and ``react_tags`` (the ReAct
  tag protocol of ``core.react``, for models without it) implement it;
- ``inline_tools``: the server-side ``memory_search`` tool both protocols answer inline,
  and ``recall_tool_result``, a cleared tool result fetched back;
- ``step_context``: the context each step is sent;
- ``interrupted`` and ``session_lease``: the turns a process's end cut off, closed at
  the next start or by the session's next turn, and one turn at a time per session, in
  this process and across the processes that share a database (``SessionTurns``);
- ``events`` and ``request``: what a turn reports and what it is asked (with which of
  the server's tools it offers).
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
from contextd.app.chat.inline_tools import MEMORY_TOOL
from contextd.app.chat.request import ChatTurnRequest, ModelOptions
from contextd.app.chat.turn import TokenUsage
from contextd.providers.base import AUTO, TEXT, ResponseFormat, ToolChoice, ToolSpec

__all__ = [
    "AUTO",
    "MEMORY_TOOL",
    "TEXT",
    "ChatApp",
    "ChatEvent",
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

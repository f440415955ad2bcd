"""What a chat turn tells its caller as it runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from contextd.app.chat.turn import TokenUsage
from contextd.app.session_build_request import ContextLayer
from contextd.core.build_request import BuildReport
from contextd.core.messages import ToolCall


class TurnStatus(StrEnum):
    OK = "ok"
    REQUIRES_ACTION = "requires_action"
    MAX_STEPS = "max_steps"
    CANCELLED = "cancelled"
    ERROR = "error"
    # Never reported to a caller: the status of a turn the server's end cut off, closed
    # at the next start (its stored answer's and its turn_end event's).
    INTERRUPTED = "interrupted"


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
    # Session mode: what each context layer of the first step's context gave.
    context_layers: Sequence[ContextLayer] = ()


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

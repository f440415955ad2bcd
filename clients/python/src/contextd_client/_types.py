"""Results the client returns: plain dataclasses, no protobuf types."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypeAlias


@dataclass(frozen=True, slots=True)
class LayerInfo:
    """How one system-prompt layer contributed: ``tokens`` is 0 when not included."""

    name: str
    included: bool
    tokens: int


@dataclass(frozen=True, slots=True)
class AssembledPrompt:
    """Result of ``assemble_prompt``."""

    system_prompt: str
    layers: list[LayerInfo]
    # Tokens of the whole system prompt.
    tokens: int
    # The tokenizer that counted.
    tokenizer: str


@dataclass(frozen=True, slots=True)
class ContextLayerInfo:
    """One layer of a session-mode build, as a chat turn's ``TurnStarted.context`` reports it.

    ``name`` is one of system, scenario, session, memory, recent_sessions, window and
    user_message; ``note`` says why a layer is missing or partial.
    """

    name: str
    included: bool
    tokens: int
    items_kept: int
    items_dropped: int
    note: str


@dataclass(frozen=True, slots=True)
class DroppedRange:
    """Consecutive history messages dropped for one reason, as the server reports them.

    ``reason`` is one of "compressed", "empty", "orphaned_tool_result", "budget",
    "leading_assistant"; from a newer server also "unspecified" or "unknown(N)", N
    being a reason number this client does not know. The ids of the dropped messages
    are those of ``history[i]`` for ``i`` in :attr:`indices`.
    """

    # Index in the request history of the first dropped message.
    start_index: int
    # Number of consecutive messages dropped, at least 1.
    count: int
    reason: str

    @property
    def indices(self) -> range:
        """The history indices this range covers."""
        return range(self.start_index, self.start_index + self.count)


@dataclass(frozen=True, slots=True)
class RemovedToolCall:
    """A tool call removed from a kept assistant message because nothing answers it."""

    # Index in the request history.
    index: int
    tool_call_id: str


@dataclass(frozen=True, slots=True)
class MovedToolResult:
    """A tool result moved back to follow its call, which another message (a user
    interrupting, say) had separated it from. It now follows the assistant message at
    ``call_index``, after that message's results already in place. Both indexes are
    history indexes, as in :class:`DroppedRange` (session mode: positions in the
    stored session); a moved result that was then dropped is in ``dropped`` at
    ``from_index``."""

    tool_call_id: str
    # Where the result was in the history.
    from_index: int
    # The assistant message with the call it answers.
    call_index: int


@dataclass(frozen=True, slots=True)
class MessageEdit:
    """One edit of a message kept: a tool result ``"capped"`` or ``"cleared"`` (with
    ``clear_tool_inputs`` its call's message is listed too), or the messages a
    compression summary replaces (``"compacted"``, ``count`` of them from ``index``).
    Indexes are history indexes, as in :class:`DroppedRange`; tokens are the message's
    before and after the edit."""

    index: int
    kind: str
    tokens_before: int
    tokens_after: int
    tool_call_id: str = ""
    tool_name: str = ""
    count: int = 1


@dataclass(frozen=True, slots=True)
class BuildReport:
    """What ``build_messages`` did, token by token."""

    tokenizer: str
    token_budget: int
    system_tokens: int
    # Tokens of the compression summary message (0 when absent or dropped).
    summary_tokens: int
    history_tokens: int
    user_message_tokens: int
    total_tokens: int
    # True when system prompt and user message alone exceed the budget.
    required_over_budget: bool
    summary_included: bool
    # History messages kept.
    history_kept: int
    # Every history message not kept, as the server reports it: runs of consecutive
    # indices with one reason, in index order.
    dropped: list[DroppedRange] = field(default_factory=list)
    removed_tool_calls: list[RemovedToolCall] = field(default_factory=list)
    # Filled when the request gave layers.
    layers: list[LayerInfo] = field(default_factory=list)
    # Session-mode builds (chat turns): what each context layer contributed, from system
    # to user_message.
    context_layers: list[ContextLayerInfo] = field(default_factory=list)
    # Tool results put back behind their calls, by from_index.
    moved_tool_results: list[MovedToolResult] = field(default_factory=list)
    # Tokens of the leading whole messages that stay the same in the next turn's list
    # (what a provider's prompt cache can hold); 0 when the first system message holds
    # the memory layers (the default cache layout).
    cacheable_prefix_tokens: int = 0
    # Tokens of the images in the messages kept (included in the counts above).
    image_tokens: int = 0
    # Every edit of the messages kept (context editing), and the compression summary's.
    edits: list[MessageEdit] = field(default_factory=list)
    # Tokens of the leading messages the clearing step at the end of this history left
    # as the previous request had them (all of them when no step happened there).
    cache_prefix_kept_tokens: int = 0


@dataclass(frozen=True, slots=True)
class BuildResult:
    """Result of ``build_messages``.

    ``messages`` are plain dicts (role, content, tool_calls, tool_call_id, parts, id,
    tokens);
    ``payload`` is the OpenAI or Anthropic body fragment, ``None`` for neutral output.
    """

    messages: list[dict[str, Any]]
    payload: dict[str, Any] | None
    report: BuildReport


@dataclass(frozen=True, slots=True)
class TokenCount:
    """Result of ``count_tokens``: one count per text and per message, in order."""

    tokenizer: str
    text_tokens: list[int]
    message_tokens: list[int]
    total_tokens: int


@dataclass(frozen=True, slots=True)
class TokenizerInfo:
    name: str
    # False when the encoding file is not on the server's machine.
    available: bool
    # Tokens added per message for chat framing.
    message_overhead: int
    description: str


@dataclass(frozen=True, slots=True)
class TokenizerList:
    """Result of ``list_tokenizers``; ``default`` is used when a call names no tokenizer."""

    tokenizers: list[TokenizerInfo]
    default: str

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tokenizers]


# Chat turns (StreamChat) ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Tokens of a step, a turn or a whole session."""

    # As the provider reported them, or counted by the server where the provider
    # reported none (then ``estimated``); the prompt's every token, cached ones included.
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # contextd's own count of the prompt, before the model was called.
    prompt_tokens_estimate: int = 0
    # Some figure above was counted by the server, not reported by the provider.
    estimated: bool = False
    # Of prompt_tokens: read from, and written to, the provider's prompt cache.
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class TurnStarted:
    """First event of a turn: the context is built and the user message is stored."""

    session_id: str
    # From 1 within the session.
    turn_index: int
    # The stored user message ("" when continuing with tool results).
    user_message_id: str
    prompt_tokens_estimate: int
    # True when the estimate is over the server's warn_prompt_tokens.
    prompt_tokens_warning: bool
    # How the prompt was built (session mode: ``context_layers`` says what each layer gave).
    context: BuildReport
    provider: str
    model: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer, as the model produced it; the pieces join to the answer."""

    text: str
    # The model call (step) of the turn it belongs to, from 0.
    step: int


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """The model called a tool.

    Calls of the server's own tools (``memory_search``) are run by the server and the
    turn goes on; calls of tools the request defined end the turn with status
    ``"requires_action"`` and are listed again in ``TurnCompleted.pending_tool_calls``.
    """

    id: str
    name: str
    # The arguments as JSON text ("" means {}); :meth:`parsed_arguments` decodes them.
    arguments: str
    step: int

    def parsed_arguments(self) -> Any:
        """The arguments decoded from JSON (``{}`` when empty); ValueError if not JSON."""
        return json.loads(self.arguments) if self.arguments.strip() else {}

    def as_dict(self) -> dict[str, str]:
        """``{"id", "name", "arguments"}``, the shape of ``TurnCompleted.pending_tool_calls``."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one model call (step), as soon as the provider reported them."""

    usage: TokenUsage
    step: int


#: A turn's status: "ok", "requires_action", "max_steps", "cancelled" or "error"
#: (from a newer server possibly "unknown(N)").
TurnStatus: TypeAlias = str

TURN_STATUSES: tuple[str, ...] = ("ok", "requires_action", "max_steps", "cancelled", "error")


@dataclass(frozen=True, slots=True)
class TurnCompleted:
    """Last event of a turn.

    ``status`` is "ok"; "requires_action" when the model called tools the request
    defined (their calls are ``pending_tool_calls``: send the results back with
    ``stream_chat("", session_id=..., tool_results=[...])``); "max_steps" when the
    server's step limit cut the turn short; "cancelled"; or "error", with
    ``error_message`` for the user (a provider failure, say). Whatever was said before
    the turn broke off is stored, and is ``final_text``.
    """

    # The stored assistant message ("" if nothing was produced).
    assistant_message_id: str
    final_text: str
    status: TurnStatus
    error_message: str
    step_usage: TokenUsage
    turn_usage: TokenUsage
    session_usage: TokenUsage
    duration_ms: int
    # ``{"id", "name", "arguments"}`` dicts, for status "requires_action".
    pending_tool_calls: list[dict[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


#: One event of a chat turn's stream.
ChatEvent: TypeAlias = TurnStarted | TextDelta | ToolCallEvent | Usage | TurnCompleted

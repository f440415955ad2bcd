"""Results the client returns: plain dataclasses, no protobuf types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


@dataclass(frozen=True, slots=True)
class BuildResult:
    """Result of ``build_messages``.

    ``messages`` are plain dicts (role, content, tool_calls, tool_call_id, id, tokens);
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

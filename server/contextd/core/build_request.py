"""What a build is asked (``BuildRequest``, checked whole by
``validate_build_request``), and what it answers: the list and its report
(``BuildResult``, ``BuildReport``, with the report's dropped ranges made from the
pipeline's drops). build.py makes one from the other."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from contextd.core.content import ContentPart
from contextd.core.editing import EditingSettings, MessageEdit
from contextd.core.editing.settings import OFF as EDITING_OFF
from contextd.core.errors import Violations
from contextd.core.formats import JsonObject, OutputFormat
from contextd.core.messages import ChatMessage, CompressionSummary
from contextd.core.pipeline import (
    DroppedRange,
    DropReason,
    MovedToolResult,
    RemovedToolCall,
    is_blank,
    validate_history,
    validate_summary,
)
from contextd.core.prompt import LayerReport, PromptLayers
from contextd.core.tokens import Tokenizer


class OverflowPolicy(StrEnum):
    KEEP_REQUIRED = "keep_required"
    FAIL = "fail"


class CacheLayout(StrEnum):
    # The volatile prompt ends the one system message.
    OFF = "off"
    # The volatile prompt is its own system message after the history; Anthropic
    # output marks cache breakpoints.
    STABLE_PREFIX = "stable_prefix"


# BuildRequest and BuildResult are never mutated; not frozen because a frozen
# dataclass is slower to create (bench/HISTORY.md), and every call creates both.
@dataclass(slots=True)
class BuildRequest:
    user_message: str
    token_budget: int
    tokenizer: Tokenizer
    system_prompts: Sequence[str] = ()
    layers: PromptLayers | None = None
    history: Sequence[ChatMessage] = ()
    compression_summary: CompressionSummary | None = None
    output_format: OutputFormat = OutputFormat.NEUTRAL
    overflow_policy: OverflowPolicy = OverflowPolicy.KEEP_REQUIRED
    # Token counts of the history messages under ``tokenizer``, when already known
    # (a stored session keeps them); counted here otherwise.
    history_tokens: Sequence[int] | None = None
    # History and summary come from the store, validated when they were written.
    history_trusted: bool = False
    # System text that changes from turn to turn (a session's memory and
    # recent_sessions layers), placed by ``cache_layout``; the memory and context
    # layers of ``layers`` are that too.
    volatile_prompt: str = ""
    cache_layout: CacheLayout = CacheLayout.OFF
    # The user message's text and images (checked by the caller); ``user_message`` is
    # then their text view.
    user_parts: tuple[ContentPart, ...] = ()
    # False where the model the list goes to cannot take a user message without text
    # (the Anthropic format never can): the history's are then dropped and reported.
    blank_user_turns: bool = True
    # Tool results capped and cleared before the budget is applied (core/editing).
    editing: EditingSettings = EDITING_OFF


@dataclass(slots=True)
class BuildReport:
    tokenizer: str
    token_budget: int
    system_tokens: int = 0
    summary_tokens: int = 0
    history_tokens: int = 0
    user_message_tokens: int = 0
    required_over_budget: bool = False
    summary_included: bool = False
    history_kept: int = 0
    dropped: list[DroppedRange] = field(default_factory=list)
    removed_tool_calls: list[RemovedToolCall] = field(default_factory=list)
    moved_tool_results: list[MovedToolResult] = field(default_factory=list)
    layers: list[LayerReport] = field(default_factory=list)
    # Tokens of the leading messages the next turn's list starts with too (see _result).
    cacheable_prefix_tokens: int = 0
    # Tokens of the images in the messages kept (included in the counts above).
    image_tokens: int = 0
    # Every edit of a message kept, and the compression summary's, in index order.
    edits: list[MessageEdit] = field(default_factory=list)
    # Tokens of the leading messages before the first one the clearing step at the
    # history's end changed; all of them before the volatile and user messages when
    # no step happened there (see _result).
    cache_prefix_kept_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        parts = (self.system_tokens, self.summary_tokens, self.history_tokens)
        return sum(parts) + self.user_message_tokens


@dataclass(slots=True)
class BuildResult:
    messages: list[ChatMessage]
    # Tokens of each message in ``messages``, same order.
    message_tokens: list[int]
    # Index in the request history of each message in ``messages`` that is that
    # history message unchanged; None for the system prompt, the summary, the user
    # message and a history message changed here (tool calls removed).
    sources: list[int | None]
    payload: JsonObject | None
    report: BuildReport
    # How many leading messages are the cacheable prefix: the system prompt, the
    # summary and the history; the volatile system message and the user message follow.
    stable_end: int = 0


def validate_build_request(req: BuildRequest, violations: Violations | None = None) -> None:
    """Raise InvalidArgument naming every bad field of the request (and every violation
    already in ``violations``)."""
    v = violations if violations is not None else Violations()
    if is_blank(req.user_message) and not req.history:
        v.add("user_message", "the current user message is required")
    if req.token_budget <= 0:
        v.add("token_budget", "must be a positive number of tokens")
    if req.layers is not None and any(not is_blank(p) for p in req.system_prompts):
        v.add("layers", "give either system_prompts or layers, not both")
    if req.layers is not None and is_blank(req.layers.identity):
        v.add("layers.identity", "identity is required and must not be blank")
    if not req.history_trusted:
        validate_history(req.history, v)
        if req.compression_summary is not None:
            validate_summary(req.compression_summary, req.history, v)
    v.raise_if_any()


def dropped_ranges(dropped: list[tuple[int, DropReason]], budget_end: int) -> list[DroppedRange]:
    """Merge individual drops with the budget cut into sorted, coalesced ranges.

    Every history index below ``budget_end`` not listed in ``dropped`` was dropped
    for the budget.
    """
    if not dropped:  # the common case
        return [DroppedRange(0, budget_end, DropReason.BUDGET)] if budget_end else []
    runs: list[DroppedRange] = []

    def add(start: int, count: int, reason: DropReason) -> None:
        last = runs[-1] if runs else None
        if last is not None and last.reason is reason and last.start_index + last.count == start:
            last.count += count
        else:
            runs.append(DroppedRange(start, count, reason))

    pos = 0
    for index, reason in sorted(dropped):
        gap_end = min(index, budget_end)
        if pos < gap_end:
            add(pos, gap_end - pos, DropReason.BUDGET)
        add(index, 1, reason)
        pos = max(pos, index + 1)
    if pos < budget_end:
        add(pos, budget_end - pos, DropReason.BUDGET)
    return runs


def caller_drops(
    origin: Sequence[int], dropped: list[tuple[int, DropReason]], budget_end: int
) -> list[DroppedRange]:
    """``dropped_ranges`` for a reordered history: each message dropped, for a reason of
    its own or the budget, at its index in the caller's history."""
    at = {origin[p]: reason for p, reason in dropped}
    for p in range(budget_end):
        at.setdefault(origin[p], DropReason.BUDGET)
    return dropped_ranges(sorted(at.items()), 0)


def caller_removed(origin: Sequence[int], removed: list[RemovedToolCall]) -> None:
    """``removed`` (positions in the reordered history) at the caller's indexes."""
    removed[:] = [RemovedToolCall(origin[r.index], r.tool_call_id) for r in removed]

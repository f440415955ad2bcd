"""Seed 000's budget rule over seed 002's pipeline: the message list a model sees.

Order: [system prompt] [compression summary] [history ...] [user message].
System prompt and user message are always kept; without a user message, the
history must end with tool results, and that last call and its results are kept
instead (a continuation after the host ran tools). The summary is kept while it
fits beside them. History is then kept newest first, a tool call and its
results as one unit, until the next older unit would not fit; everything older
is dropped. A message's tokens are counted at most once, and only for the
messages trimming looks at, so the cost follows what is kept, not the history
length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from contextd.core.errors import BudgetExceeded, FailedPrecondition, InvalidArgument, Violations
from contextd.core.formats import JsonObject, OutputFormat, render
from contextd.core.messages import ChatMessage, CompressionSummary, Role
from contextd.core.pipeline import (
    Dropped,
    DropReason,
    Entry,
    RemovedToolCall,
    apply_compression,
    check_pipeline_invariants,
    drop_empty,
    drop_orphaned_tool_results,
    drop_unanswered_tool_calls,
    group_turns,
    summary_message,
    validate_history,
    validate_summary,
)
from contextd.core.prompt import LayerReport, PromptLayers, assemble_system_prompt, report_layers
from contextd.core.tokens import Tokenizer, message_tokens


class OverflowPolicy(StrEnum):
    KEEP_REQUIRED = "keep_required"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
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
    dropped: list[Dropped] = field(default_factory=list)
    removed_tool_calls: list[RemovedToolCall] = field(default_factory=list)
    layers: list[LayerReport] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        return (
            self.system_tokens
            + self.summary_tokens
            + self.history_tokens
            + self.user_message_tokens
        )


@dataclass(frozen=True, slots=True)
class BuildResult:
    messages: list[ChatMessage]
    # Tokens of each message in ``messages``, same order.
    message_tokens: list[int]
    payload: JsonObject | None
    report: BuildReport


def validate_build_request(req: BuildRequest, violations: Violations | None = None) -> None:
    """Raise InvalidArgument naming every bad field of the request."""
    v = violations if violations is not None else Violations()
    if not req.user_message.strip() and not req.history:
        v.add("user_message", "the current user message is required")
    if req.token_budget <= 0:
        v.add("token_budget", "must be a positive number of tokens")
    if req.layers is not None and any(p.strip() for p in req.system_prompts):
        v.add("layers", "give either system_prompts or layers, not both")
    if req.layers is not None and not req.layers.identity.strip():
        v.add("layers.identity", "identity is required and must not be blank")
    validate_history(req.history, v)
    if req.compression_summary is not None:
        validate_summary(req.compression_summary, req.history, v)
    v.raise_if_any()


def system_text(req: BuildRequest) -> str:
    if req.layers is not None:
        return assemble_system_prompt(req.layers)
    # Seed 002 joins several system prompts with a single newline.
    return "\n".join(p for p in req.system_prompts if p.strip())


def build_messages(req: BuildRequest) -> BuildResult:
    validate_build_request(req)
    tok = req.tokenizer
    report = BuildReport(tokenizer=tok.name, token_budget=req.token_budget)
    if req.layers is not None:
        report.layers = report_layers(req.layers, tok)

    system = system_text(req)
    system_msg = ChatMessage(Role.SYSTEM, system) if system else None
    report.system_tokens = message_tokens(system_msg, tok) if system_msg else 0
    groups = group_turns(repair_history(req.history, req.compression_summary, report))

    # The pinned end: the user message, or, to continue after tool results, the last
    # tool call with its results.
    user_msg: ChatMessage | None = None
    tail: list[Entry] = []
    tail_tokens: list[int] = []
    if req.user_message.strip():
        user_msg = ChatMessage(Role.USER, req.user_message)
        report.user_message_tokens = message_tokens(user_msg, tok)
    elif groups and groups[-1][-1].message.role is Role.TOOL:
        tail = groups.pop()
        tail_tokens = [message_tokens(e.message, tok) for e in tail]
    else:
        raise InvalidArgument.one(
            "user_message", "required unless the history ends with tool results to continue from"
        )

    available = req.token_budget - report.system_tokens - report.user_message_tokens
    available -= sum(tail_tokens)
    if available < 0:
        report.required_over_budget = True
        if req.overflow_policy is OverflowPolicy.FAIL:
            raise BudgetExceeded(
                f"system prompt ({report.system_tokens} tokens) and "
                f"{'user message' if user_msg else 'continued tool results'} "
                f"({report.user_message_tokens or sum(tail_tokens)} tokens) "
                f"exceed token_budget {req.token_budget}"
            )

    summary_msg = None
    if req.compression_summary is not None:
        summary_msg = summary_message(req.compression_summary)
        summary_tokens = message_tokens(summary_msg, tok)
        if summary_tokens <= available:
            available -= summary_tokens
            report.summary_tokens = summary_tokens
            report.summary_included = True
        else:
            summary_msg = None

    kept, kept_tokens = _trim(groups, available, tok, report)
    kept += tail
    kept_tokens += tail_tokens
    if req.output_format is OutputFormat.ANTHROPIC:
        kept, kept_tokens = _start_with_user(kept, kept_tokens, len(tail), report)
    report.history_tokens = sum(kept_tokens)
    report.history_kept = len(kept)
    report.dropped.sort(key=lambda d: d.index)

    messages: list[ChatMessage] = []
    counts: list[int] = []
    if system_msg is not None:
        messages.append(system_msg)
        counts.append(report.system_tokens)
    if summary_msg is not None:
        messages.append(summary_msg)
        counts.append(report.summary_tokens)
    messages.extend(e.message for e in kept)
    counts.extend(kept_tokens)
    if user_msg is not None:
        messages.append(user_msg)
        counts.append(report.user_message_tokens)
    return BuildResult(messages, counts, render(req.output_format, messages), report)


def repair_history(
    history: Sequence[ChatMessage], summary: CompressionSummary | None, report: BuildReport
) -> list[Entry]:
    """Seed 002's steps 1-3 and 5, plus removal of tool calls nobody answered."""
    entries = [Entry(i, m) for i, m in enumerate(history)]
    entries, dropped = apply_compression(entries, summary)
    report.dropped.extend(dropped)
    entries, dropped = drop_empty(entries)
    report.dropped.extend(dropped)
    entries, dropped = drop_orphaned_tool_results(entries)
    report.dropped.extend(dropped)
    entries, dropped, removed = drop_unanswered_tool_calls(entries)
    report.dropped.extend(dropped)
    report.removed_tool_calls.extend(removed)
    check_pipeline_invariants(entries)
    return entries


def _trim(
    groups: list[list[Entry]], available: int, tok: Tokenizer, report: BuildReport
) -> tuple[list[Entry], list[int]]:
    """Keep the newest groups that fit in ``available``; drop every older one."""
    kept_groups: list[tuple[list[Entry], list[int]]] = []
    for g in range(len(groups) - 1, -1, -1):
        counts = [message_tokens(e.message, tok) for e in groups[g]]
        cost = sum(counts)
        if cost > available:
            report.dropped.extend(
                Dropped(e.index, e.message.id, DropReason.BUDGET, n)
                for e, n in zip(groups[g], counts, strict=True)
            )
            # Older messages are not counted: trimming cost follows what is kept.
            report.dropped.extend(
                Dropped(e.index, e.message.id, DropReason.BUDGET)
                for older in groups[:g]
                for e in older
            )
            break
        available -= cost
        kept_groups.append((groups[g], counts))
    kept: list[Entry] = []
    kept_tokens: list[int] = []
    for group, counts in reversed(kept_groups):
        kept.extend(group)
        kept_tokens.extend(counts)
    return kept, kept_tokens


def _start_with_user(
    kept: list[Entry], kept_tokens: list[int], pinned: int, report: BuildReport
) -> tuple[list[Entry], list[int]]:
    """Anthropic needs the first turn to be the user's: drop leading assistant units."""
    start = 0
    while start < len(kept) and kept[start].message.role is not Role.USER:
        if start >= len(kept) - pinned:
            raise FailedPrecondition(
                "the Anthropic format needs a user message before the continued tool call, "
                "and none is in the history within the budget"
            )
        e = kept[start]
        report.dropped.append(
            Dropped(e.index, e.message.id, DropReason.LEADING_ASSISTANT, kept_tokens[start])
        )
        start += 1
    return kept[start:], kept_tokens[start:]

"""Seed 000's budget rule over seed 002's pipeline: the message list a model sees.

Order: [system prompt] [compression summary] [history ...] [user message].
System prompt and user message are always kept; without a user message, the
history must end with tool results, and that last call and its results are kept
instead (a continuation after the host ran tools). The summary is kept while it
fits beside them. History is then kept newest first, a tool call and its results
as one unit, until the next older unit would not fit; everything older is
dropped. Tokens are counted only for the messages trimming looks at, so the cost
follows what is kept, not the history length.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from contextd.core.errors import BudgetExceeded, FailedPrecondition, InvalidArgument, Violations
from contextd.core.formats import JsonObject, OutputFormat, render
from contextd.core.messages import ChatMessage, CompressionSummary, Role
from contextd.core.pipeline import (
    DroppedRange,
    DropReason,
    Entry,
    RemovedToolCall,
    Unit,
    dropped_ranges,
    is_blank,
    summary_message,
    units_newest_first,
    validate_history,
    validate_summary,
)
from contextd.core.prompt import LayerReport, PromptLayers, assemble_system_prompt, report_layers
from contextd.core.tokens import Tokenizer, message_tokens


class OverflowPolicy(StrEnum):
    KEEP_REQUIRED = "keep_required"
    FAIL = "fail"


# BuildRequest and BuildResult are never mutated; not frozen because a frozen
# dataclass takes three times as long to create, and every call creates both.
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
    layers: list[LayerReport] = field(default_factory=list)

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


def validate_build_request(req: BuildRequest, violations: Violations | None = None) -> bool:
    """Raise InvalidArgument naming every bad field of the request. Returns whether the
    history is known to be plain (see ``validate_history``)."""
    v = violations if violations is not None else Violations()
    if is_blank(req.user_message) and not req.history:
        v.add("user_message", "the current user message is required")
    if req.token_budget <= 0:
        v.add("token_budget", "must be a positive number of tokens")
    if req.layers is not None and any(not is_blank(p) for p in req.system_prompts):
        v.add("layers", "give either system_prompts or layers, not both")
    if req.layers is not None and is_blank(req.layers.identity):
        v.add("layers.identity", "identity is required and must not be blank")
    plain = False
    if not req.history_trusted:
        plain = validate_history(req.history, v)
        if req.compression_summary is not None:
            validate_summary(req.compression_summary, req.history, v)
    v.raise_if_any()
    return plain


def system_text(req: BuildRequest) -> str:
    if req.layers is not None:
        return assemble_system_prompt(req.layers)
    return join_system_prompts(req.system_prompts)


def join_system_prompts(prompts: Sequence[str]) -> str:
    # Seed 002 joins several system prompts with a single newline.
    return "\n".join([p for p in prompts if not is_blank(p)])


@dataclass(slots=True)
class _Kept:
    """History kept so far with its token counts, newest message first."""

    entries: list[Entry] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)

    def add(self, unit: Unit, counts: list[int]) -> None:
        if len(unit) == 1:
            self.entries.append(unit[0])
            self.tokens.append(counts[0])
        else:
            self.entries.extend(reversed(unit))
            self.tokens.extend(reversed(counts))

    def oldest_first(self) -> tuple[list[Entry], list[int]]:
        self.entries.reverse()
        self.tokens.reverse()
        return self.entries, self.tokens


# Enum members read once: a lookup on the class costs ~50 ns, and these are per call.
_SYSTEM, _USER, _TOOL = Role.SYSTEM, Role.USER, Role.TOOL
_NEUTRAL, _ANTHROPIC = OutputFormat.NEUTRAL, OutputFormat.ANTHROPIC


def build_messages(req: BuildRequest) -> BuildResult:
    plain = validate_build_request(req)
    tok = req.tokenizer
    report = BuildReport(tok.name, req.token_budget)
    if req.layers is not None:
        report.layers = report_layers(req.layers, tok)

    system = system_text(req)
    system_msg = None
    if system:
        system_msg = ChatMessage(_SYSTEM, system)
        report.system_tokens = message_tokens(system_msg, tok)

    known = req.history_tokens
    overhead, count = tok.message_overhead, tok.count

    def unit_tokens(unit: Unit) -> list[int]:
        if known is not None:
            return [known[i] for i, _ in unit]
        if len(unit) == 1 and not unit[0][1].tool_calls:
            return [overhead + count(unit[0][1].content)]  # message_tokens, inlined: hot
        return [message_tokens(m, tok) for _, m in unit]

    dropped: list[tuple[int, DropReason]] = []
    units = units_newest_first(
        req.history, req.compression_summary, dropped, report.removed_tool_calls
    )
    kept = _Kept()

    # The pinned end: the user message, or, to continue after tool results, the
    # newest tool call with its results.
    user_msg: ChatMessage | None = None
    pinned = 0
    if not is_blank(req.user_message):
        user_msg = ChatMessage(_USER, req.user_message)
        report.user_message_tokens = message_tokens(user_msg, tok)
    else:
        tail = next(units, None)
        if tail is None or tail[-1][1].role is not _TOOL:
            raise InvalidArgument.one(
                "user_message",
                "required unless the history ends with tool results to continue from",
            )
        kept.add(tail, unit_tokens(tail))
        pinned = len(tail)

    available = req.token_budget - report.system_tokens - report.user_message_tokens
    if pinned:
        available -= sum(kept.tokens)
    if available < 0:
        report.required_over_budget = True
        if req.overflow_policy is OverflowPolicy.FAIL:
            what = "user message" if user_msg else "continued tool results"
            raise BudgetExceeded(
                f"system prompt ({report.system_tokens} tokens) and {what} "
                f"({req.token_budget - report.system_tokens - available} tokens) "
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

    kept_indices: Sequence[int]
    kept_messages: Sequence[ChatMessage]
    fit_plain = plain and known is None and req.compression_summary is None and user_msg
    if fit_plain:
        history = req.history
        newest_first = (m.content for m in reversed(history))
        budget_end, counts = fit_newest(newest_first, len(history), available, tok)
        kept_indices = range(budget_end, len(req.history))
        kept_messages = req.history[budget_end:]
    else:
        budget_end = _fill(units, available, unit_tokens, kept)
        entries, counts = kept.oldest_first()
        kept_indices = [i for i, _ in entries]
        kept_messages = [m for _, m in entries]
    if req.output_format is _ANTHROPIC:
        start = _user_first(kept_indices, kept_messages, pinned, dropped)
        kept_indices, kept_messages, counts = (
            kept_indices[start:],
            kept_messages[start:],
            counts[start:],
        )
    report.history_tokens = sum(counts)
    report.history_kept = len(kept_messages)
    report.dropped = dropped_ranges(dropped, budget_end)
    if len(report.removed_tool_calls) > 1:
        report.removed_tool_calls.sort(key=lambda r: r.index)

    messages: list[ChatMessage] = []
    tokens: list[int] = []
    sources: list[int | None] = []
    for msg, n in ((system_msg, report.system_tokens), (summary_msg, report.summary_tokens)):
        if msg is not None:
            messages.append(msg)
            tokens.append(n)
            sources.append(None)
    messages.extend(kept_messages)
    tokens.extend(counts)
    if fit_plain:
        sources.extend(kept_indices)
    else:  # a repaired message is not the request's any more
        history = req.history
        pairs = zip(kept_indices, kept_messages, strict=True)
        sources.extend([i if m is history[i] else None for i, m in pairs])
    if user_msg is not None:
        messages.append(user_msg)
        tokens.append(report.user_message_tokens)
        sources.append(None)
    payload = None if req.output_format is _NEUTRAL else render(req.output_format, messages)
    return BuildResult(messages, tokens, sources, payload, report)


def _fill(
    units: Iterator[Unit], available: int, unit_tokens: Callable[[Unit], list[int]], kept: _Kept
) -> int:
    """Keep the newest units that fit; return the end of the budget-dropped index range."""
    for unit in units:
        counts = unit_tokens(unit)
        cost = sum(counts)
        if cost > available:
            budget_end = unit[-1][0] + 1
            # Older units are only classified, never tokenized.
            for _ in units:
                pass
            return budget_end
        available -= cost
        kept.add(unit, counts)
    return 0


def fit_newest(
    newest_first: Iterable[str], size: int, available: int, tok: Tokenizer
) -> tuple[int, list[int]]:
    """``_fill`` for a plain history of ``size`` messages (each a unit of its own, nothing
    to repair), given by its texts newest first, read only as far as they fit: the
    common case, without the pipeline's per-unit machinery. Returns the index of the
    oldest kept message and the kept messages' token counts, oldest first."""
    costs: list[int] = []
    add = costs.append
    known, count, overhead = tok.known_counts.get, tok.count, tok.message_overhead
    start = size
    for text in newest_first:
        tokens = known(text)
        cost = overhead + (count(text) if tokens is None else tokens)
        if cost > available:
            break
        available -= cost
        add(cost)
        start -= 1
    costs.reverse()
    return start, costs


def _user_first(
    indices: Sequence[int],
    messages: Sequence[ChatMessage],
    pinned: int,
    dropped: list[tuple[int, DropReason]],
) -> int:
    """Anthropic needs the first turn to be the user's: the number of leading kept
    messages to drop (recorded in ``dropped``)."""
    start = 0
    while start < len(messages) and messages[start].role is not Role.USER:
        if start >= len(messages) - pinned:
            raise FailedPrecondition(
                "the Anthropic format needs a user message before the continued tool call, "
                "and none is in the history within the budget"
            )
        dropped.append((indices[start], DropReason.LEADING_ASSISTANT))
        start += 1
    return start

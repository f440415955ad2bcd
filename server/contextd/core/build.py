"""The message list a model sees: the budget rule applied over the message pipeline.

Order: [system prompt] [compression summary] [history ...] [user message]. With
the stable-prefix cache layout, the volatile part of the system prompt (the text
that changes from turn to turn) is a second system message right after the
history, so that everything before it can stay in a provider's prompt cache.
System prompt and user message are always kept; without a user message, the
history must end with tool results, and that last call and its results are kept
instead (a continuation after the host ran tools). The summary is kept while it
fits beside them. The rest of the budget goes to the newest history, by the rule
in ``core/pipeline.py`` (``fit_units``); everything older is dropped.

The request and its result are build_request.py's, the system prompt
system_prompt.py's. ``build_messages`` reads as its steps: validate the request; prepare the history
(tool results a message separated from their calls moved back to them, then the
pipeline's repairs and the compression summary, as units newest first); pin
the end that always stays; fit the summary, then the history; render the list and
its report. Most requests are plain (a system prompt, user and assistant turns with
text and nothing to repair, a user message, the neutral output): ``_build_plain``
answers those by the same rule without the steps they do not need.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from contextd.core.build_request import (
    BuildReport,
    BuildRequest,
    BuildResult,
    CacheLayout,
    OverflowPolicy,
    caller_drops,
    caller_removed,
    dropped_ranges,
    validate_build_request,
)
from contextd.core.editing import EditedHistory
from contextd.core.editing import edit_history as _edit_history
from contextd.core.editing.report import compaction_edit, first_changed, kept_edits
from contextd.core.errors import BudgetExceeded, FailedPrecondition, InvalidArgument
from contextd.core.formats import OutputFormat, render
from contextd.core.messages import ChatMessage, Role
from contextd.core.pipeline import (
    DroppedRange,
    DropReason,
    KeptHistory,
    Reordered,
    Unit,
    fit_newest,
    fit_units,
    is_blank,
    is_plain,
    replaced_ids,
    restore_tool_results,
    summary_message,
    unit_costs,
    units_newest_first,
)
from contextd.core.system_prompt import join_system_prompts, system_messages, volatile_in_system
from contextd.core.tokens import Tokenizer, message_image_tokens, message_tokens

# Enum members read once: looked up on the class per call, they show up in the
# BuildMessages benchmark.
_SYSTEM, _USER, _TOOL = Role.SYSTEM, Role.USER, Role.TOOL
_NEUTRAL, _ANTHROPIC = OutputFormat.NEUTRAL, OutputFormat.ANTHROPIC
_STABLE_PREFIX = CacheLayout.STABLE_PREFIX
_BUDGET = DropReason.BUDGET


@dataclass(slots=True)
class _Ends:
    """The messages around the history, each None when absent."""

    system: ChatMessage | None
    summary: ChatMessage | None
    volatile: ChatMessage | None
    volatile_tokens: int
    user: ChatMessage | None


@dataclass(slots=True)
class _Fitted:
    """The history kept, oldest first."""

    indices: Sequence[int]  # in the history as prepared (results moved back to their calls)
    messages: Sequence[ChatMessage]
    tokens: list[int]
    sources: Sequence[int | None]  # as ``BuildResult.sources``, in the history as prepared
    # History as prepared below this index went for the budget, unless dropped for a
    # reason of its own.
    budget_end: int


def build_messages(req: BuildRequest) -> BuildResult:
    """Validate, prepare the history, pin what always stays, fit the rest, render; the
    plain case the short way."""
    # A trusted history is not checked here, so it is not known to be plain.
    plain = not req.history_trusted and is_plain(req.history)
    if plain:
        built = _build_plain(req)
        if built is not None:
            return built
    validate_build_request(req)
    tok = req.tokenizer
    report = BuildReport(tok.name, req.token_budget)
    system_msg, volatile_msg, volatile_tokens = system_messages(req, report)

    # Prepare: tool results out of place go back to their calls (a plain history has
    # none); then the pipeline repairs the history and applies the compression summary
    # as fitting asks for units, newest first. Until the report is made, indexes are
    # positions in the reordered history.
    # The Anthropic format cannot carry a blank user message (the Messages API refuses a
    # text block without text): there it is dropped, and the report says so.
    blank_user_turns = req.blank_user_turns and req.output_format is not _ANTHROPIC
    reordered = None
    if not plain:
        replaced = replaced_ids(req.compression_summary)
        reordered = restore_tool_results(req.history, replaced, blank_user_turns)
    given = req.history if reordered is None else reordered.history
    known = _known_counts(req, reordered)
    # Edit, then fit: capped and cleared results are what the budget counts.
    edited = None
    if req.editing.active and not plain:
        replaced = replaced_ids(req.compression_summary)
        edited = _edit_history(given, replaced, known, req.editing, tok)
    history = given
    if edited is not None:
        history, known = edited.history, edited.counts
    dropped: list[tuple[int, DropReason]] = []
    units = units_newest_first(
        history, req.compression_summary, dropped, report.removed_tool_calls, blank_user_turns
    )

    kept = KeptHistory()
    user_msg = _pin_end(req, report, units, known, kept)
    pinned = len(kept.entries)
    available = _room(req, report, sum(kept.tokens), user_msg is not None)
    summary_msg, available = _fit_summary(req, report, available)
    if plain and user_msg and req.history_tokens is None and req.compression_summary is None:
        fitted = _fit_plain(req.history, available, tok)
    else:
        fitted = _fit_repaired(given, units, available, known, tok, kept)
    if req.output_format is _ANTHROPIC:
        fitted = _user_first(fitted, pinned, dropped)
    ends = _Ends(system_msg, summary_msg, volatile_msg, volatile_tokens, user_msg)
    result = _result(req, report, dropped, ends, fitted, reordered)
    if edited is not None or report.summary_included:
        given_known = _known_counts(req, reordered)
        _report_edits(req, report, result, fitted, edited, reordered, dropped, given, given_known)
    return result


def _build_plain(req: BuildRequest) -> BuildResult | None:
    """``build_messages`` for a request with a plain history when the whole request is
    the plain case: a user message of text, a positive budget, no compression summary,
    nothing volatile, no prompt layers, the neutral output. Such a request is valid (none
    of ``validate_build_request``'s checks can fail), and the list is [system prompt] +
    the history's newest messages that fit + [user message]. None when the request is
    not that case, or when the required messages alone are over the budget (the general
    way reports that)."""
    user_message = req.user_message
    if (
        req.output_format is not _NEUTRAL
        or req.layers is not None
        or req.compression_summary is not None
        or req.history_tokens is not None
        or req.token_budget <= 0
        or req.user_parts
        or is_blank(user_message)
        or not is_blank(req.volatile_prompt)
    ):
        return None
    tok = req.tokenizer
    overhead = tok.message_overhead
    system = join_system_prompts(req.system_prompts)
    system_tokens = overhead + tok.count(system) if system else 0
    user_tokens = overhead + tok.count(user_message)
    available = req.token_budget - system_tokens - user_tokens
    if available < 0:
        return None
    history = req.history
    start, counts = fit_newest(history, available, tok)
    history_tokens = sum(counts)
    report = BuildReport(
        tok.name,
        req.token_budget,
        system_tokens=system_tokens,
        history_tokens=history_tokens,
        user_message_tokens=user_tokens,
        history_kept=len(counts),
        # Nothing here changes next turn: the system prompt and history are a prefix.
        cacheable_prefix_tokens=system_tokens + history_tokens,
        cache_prefix_kept_tokens=system_tokens + history_tokens,
    )
    if start:
        report.dropped.append(DroppedRange(0, start, _BUDGET))
    messages: list[ChatMessage] = [ChatMessage(_SYSTEM, system)] if system else []
    tokens = [system_tokens] if system else []
    sources: list[int | None] = [None] if system else []
    messages += history[start:]
    tokens += counts
    sources += range(start, len(history))
    stable_end = len(messages)
    messages.append(ChatMessage(_USER, user_message))
    tokens.append(user_tokens)
    sources.append(None)
    return BuildResult(messages, tokens, sources, None, report, stable_end)


def _known_counts(req: BuildRequest, reordered: Reordered | None) -> Sequence[int] | None:
    """The request's known token counts at the reordered history's positions; None when
    they are to be counted."""
    known = req.history_tokens
    if known is not None and reordered is not None:
        return [known[i] for i in reordered.origin]
    return known


def _pin_end(
    req: BuildRequest,
    report: BuildReport,
    units: Iterator[Unit],
    known: Sequence[int] | None,
    kept: KeptHistory,
) -> ChatMessage | None:
    """The end that always stays: the user message, or, to continue after tool results,
    the newest tool call with its results (added to ``kept``; None is returned)."""
    if not is_blank(req.user_message):
        user_msg = ChatMessage(_USER, req.user_message, parts=req.user_parts)
        report.user_message_tokens = message_tokens(user_msg, req.tokenizer)
        return user_msg
    tail = next(units, None)
    if tail is None or tail[-1][1].role is not _TOOL:
        raise InvalidArgument.one(
            "user_message",
            "required unless the history ends with tool results to continue from",
        )
    kept.add(tail, unit_costs(tail, known, req.tokenizer))
    return None


def _room(req: BuildRequest, report: BuildReport, pinned_tokens: int, has_user: bool) -> int:
    """The budget left beside the system prompt and the pinned end; below zero, the
    overflow policy decides whether to go on with the required messages alone."""
    required = report.system_tokens + report.user_message_tokens + pinned_tokens
    available = req.token_budget - required
    if available < 0:
        report.required_over_budget = True
        if req.overflow_policy is OverflowPolicy.FAIL:
            what = "user message" if has_user else "continued tool results"
            raise BudgetExceeded(
                f"system prompt ({report.system_tokens} tokens) and {what} "
                f"({required - report.system_tokens} tokens) "
                f"exceed token_budget {req.token_budget}"
            )
    return available


def _fit_summary(
    req: BuildRequest, report: BuildReport, available: int
) -> tuple[ChatMessage | None, int]:
    """The compression summary's message when it fits, and the budget left after it."""
    if req.compression_summary is None:
        return None, available
    summary_msg = summary_message(req.compression_summary)
    tokens = message_tokens(summary_msg, req.tokenizer)
    if tokens > available:
        return None, available
    report.summary_tokens = tokens
    report.summary_included = True
    return summary_msg, available - tokens


def _fit_plain(history: Sequence[ChatMessage], available: int, tok: Tokenizer) -> _Fitted:
    """A plain history needs no units: its messages are fitted as they are."""
    start, counts = fit_newest(history, available, tok)
    indices = range(start, len(history))
    return _Fitted(indices, history[start:], counts, indices, start)


def _fit_repaired(
    given: Sequence[ChatMessage],
    units: Iterator[Unit],
    available: int,
    known: Sequence[int] | None,
    tok: Tokenizer,
    kept: KeptHistory,
) -> _Fitted:
    budget_end = fit_units(units, available, known, tok, kept)
    entries, counts = kept.oldest_first()
    # A repaired or edited message is not the request's any more (``given``: the
    # history before the edits).
    sources = [i if m is given[i] else None for i, m in entries]
    return _Fitted([i for i, _ in entries], [m for _, m in entries], counts, sources, budget_end)


def _user_first(fitted: _Fitted, pinned: int, dropped: list[tuple[int, DropReason]]) -> _Fitted:
    """Anthropic needs the first turn to be the user's: the kept history without its
    leading non-user messages (recorded in ``dropped``)."""
    messages = fitted.messages
    start = 0
    while start < len(messages) and messages[start].role is not _USER:
        if start >= len(messages) - pinned:
            raise FailedPrecondition(
                "the Anthropic format needs a user message before the continued tool call, "
                "and none is in the history within the budget"
            )
        dropped.append((fitted.indices[start], DropReason.LEADING_ASSISTANT))
        start += 1
    if not start:
        return fitted
    return _Fitted(
        fitted.indices[start:],
        messages[start:],
        fitted.tokens[start:],
        fitted.sources[start:],
        fitted.budget_end,
    )


def _result(
    req: BuildRequest,
    report: BuildReport,
    dropped: list[tuple[int, DropReason]],
    ends: _Ends,
    fitted: _Fitted,
    reordered: Reordered | None,
) -> BuildResult:
    """The message list in order, its tokens and sources, the payload and the report.

    The cacheable prefix is the leading whole messages the next turn's list starts
    with too: all before the volatile system message and the user message, or none
    when the first system message holds the volatile text itself (default layout).
    """
    report.history_tokens = sum(fitted.tokens)
    report.history_kept = len(fitted.messages)
    kept_sources = fitted.sources
    if reordered is None:
        report.dropped = dropped_ranges(dropped, fitted.budget_end)
    else:
        kept_sources = _to_caller_indexes(report, dropped, fitted, reordered)
    if len(report.removed_tool_calls) > 1:
        report.removed_tool_calls.sort(key=lambda r: r.index)

    messages: list[ChatMessage] = []
    tokens: list[int] = []
    sources: list[int | None] = []
    volatile_msg, volatile_tokens = ends.volatile, ends.volatile_tokens
    system_tokens = report.system_tokens - volatile_tokens
    for msg, n in ((ends.system, system_tokens), (ends.summary, report.summary_tokens)):
        if msg is not None:
            messages.append(msg)
            tokens.append(n)
            sources.append(None)
    messages.extend(fitted.messages)
    tokens.extend(fitted.tokens)
    sources.extend(kept_sources)
    stable_end = len(messages)
    prefix = system_tokens + report.summary_tokens + report.history_tokens
    report.cache_prefix_kept_tokens = prefix
    if req.cache_layout is _STABLE_PREFIX or not volatile_in_system(req):
        report.cacheable_prefix_tokens = prefix
    for msg, n in ((volatile_msg, volatile_tokens), (ends.user, report.user_message_tokens)):
        if msg is not None:
            messages.append(msg)
            tokens.append(n)
            sources.append(None)
    with_images = [m for m in messages if m.parts]
    if with_images:
        report.image_tokens = sum(message_image_tokens(m, req.tokenizer) for m in with_images)
    payload = None
    if req.output_format is not _NEUTRAL:
        cached = stable_end if req.cache_layout is _STABLE_PREFIX else None
        payload = render(req.output_format, messages, cached)
    return BuildResult(messages, tokens, sources, payload, report, stable_end)


def _to_caller_indexes(
    report: BuildReport,
    dropped: list[tuple[int, DropReason]],
    fitted: _Fitted,
    reordered: Reordered,
) -> list[int | None]:
    """The report at the caller's history indexes (it was built on the reordered
    history's positions), with the moves; returns the kept messages' sources."""
    origin = reordered.origin
    report.dropped = caller_drops(origin, dropped, fitted.budget_end)
    caller_removed(origin, report.removed_tool_calls)
    report.moved_tool_results = reordered.moved
    return [None if p is None else origin[p] for p in fitted.sources]


def _report_edits(
    req: BuildRequest,
    report: BuildReport,
    result: BuildResult,
    fitted: _Fitted,
    edited: EditedHistory | None,
    reordered: Reordered | None,
    dropped: list[tuple[int, DropReason]],
    given: Sequence[ChatMessage],
    known: Sequence[int] | None,
) -> None:
    """The edits of the messages kept, and the compression summary's, at the caller's
    indexes; what of the prefix the newest clearing step left."""
    compacted = None
    if report.summary_included:
        replaced = [i for i, reason in dropped if reason is DropReason.COMPRESSED]
        compacted = compaction_edit(replaced, given, known, report.summary_tokens, req.tokenizer)
    origin = reordered.origin if reordered is not None else None
    report.edits = kept_edits(edited, fitted.indices, origin, compacted)
    cut = first_changed(edited, fitted.indices)
    if cut is not None:
        # The list's messages before the first one the newest step changed.
        offset = result.stable_end - len(fitted.indices)
        report.cache_prefix_kept_tokens = sum(result.message_tokens[: offset + cut])

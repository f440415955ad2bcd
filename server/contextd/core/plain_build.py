"""BuildMessages' most common request, answered without domain objects.

Most calls carry a plain history: user and assistant turns with text, no tool
calls, no compression summary, a user message, the neutral output. For those the
pipeline of ``build_messages`` has nothing to repair or report, and turning every
API message into a ChatMessage, then back, costs more than the rest of the call.
``build_plain`` reads each API message of the request as received once, checks the
request is that case, and applies the same budget rule; for anything else it
returns None and the caller goes the general way (which also names every bad
field). Property tests hold both ways to the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from contextd.core.build import BuildReport, join_system_prompts
from contextd.core.fit import fit_newest
from contextd.core.formats import OutputFormat
from contextd.core.inline_request import ApiMessage, InlineRequest
from contextd.core.messages import Role
from contextd.core.pipeline import DroppedRange, DropReason, is_blank
from contextd.core.tokens import Tokenizer


@dataclass(slots=True)
class PlainResult:
    """The message list is [system] + history[kept_from:] + [user message]."""

    system_prompt: str  # "" when there is none
    kept_from: int
    kept_tokens: list[int]  # tokens of history[kept_from:], oldest first
    user_message: str
    report: BuildReport


_NEUTRAL = OutputFormat.NEUTRAL  # read once, as the enum members below


def build_plain(req: InlineRequest, tok: Tokenizer) -> PlainResult | None:
    """``build_messages`` for a plain request, or None when the request is not one;
    ``tok`` is the request's tokenizer."""
    texts = plain_texts(req)
    return None if texts is None else fit_plain(req, texts, tok)


def plain_texts(req: InlineRequest) -> list[str] | None:
    """The history's texts when the request is the plain case, else None: the cheap
    half of ``build_plain``, reading each message once and counting nothing."""
    if (
        req.violations
        or req.output_format is not _NEUTRAL
        or req.layers is not None
        or req.compression_summary is not None
        or req.token_budget <= 0
        or is_blank(req.user_message)
        or req.user_parts
    ):
        return None
    return _plain_texts(req.history, req.roles)


def fit_plain(req: InlineRequest, texts: Sequence[str], tok: Tokenizer) -> PlainResult | None:
    """The counting half of ``build_plain``, given ``plain_texts(req)``."""
    system = join_system_prompts(req.system_prompts)
    overhead = tok.message_overhead
    system_tokens = overhead + tok.count(system) if system else 0
    user_tokens = overhead + tok.count(req.user_message)
    available = req.token_budget - system_tokens - user_tokens
    if available < 0:
        return None  # over budget before any history: the general way reports it
    kept_from, counts = fit_newest(reversed(texts), len(texts), available, tok)
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
    )
    if kept_from:
        report.dropped.append(DroppedRange(0, kept_from, DropReason.BUDGET))
    return PlainResult(system, kept_from, counts, req.user_message, report)


def _plain_texts(history: Sequence[ApiMessage], roles: Mapping[int, Role]) -> list[str] | None:
    """The messages' texts when every message is a user or assistant turn with text and
    nothing else, ids unique (what ``validate_history`` calls plain); None otherwise."""
    texts: list[str] = []
    add = texts.append
    ids: set[str] = set()
    # Read once: per message, enum member lookups show up in the BuildMessages benchmark.
    user, assistant = Role.USER, Role.ASSISTANT
    for m in history:
        role = roles.get(m.role)
        if (
            (role is not user and role is not assistant)
            or m.tool_calls
            or m.tool_call_id
            or m.parts
        ):
            return None
        text = m.content
        if not text or text.isspace():
            return None
        message_id = m.id
        if message_id:
            if message_id in ids:
                return None
            ids.add(message_id)
        add(text)
    return texts

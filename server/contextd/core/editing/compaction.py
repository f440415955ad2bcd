"""When a session is compacted after a turn, and where the cut falls.

A compaction folds a session's older messages, those its active compression summary
does not cover yet, into a new summary. It runs when those messages are over a trigger:
``trigger_tokens``, or ``trigger_share`` of the turn's token budget (the lower of the two
when both are set). It keeps the newest ``keep_messages`` messages verbatim, or the
newest ``keep_turns`` turns when that is set; the cut then moves back to a user message
that no tool result after it answers a call before it, so that a tool call is never
folded without its results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from contextd.core.errors import Violations
from contextd.core.messages import ChatMessage, Role

MAX_PROMPT_CHARS = 4000
MAX_TIMEOUT = 600.0
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    enabled: bool = True
    trigger_tokens: int = 0
    trigger_share: float = 0.75
    keep_messages: int = 10
    keep_turns: int = 0
    model: str = ""  # "" for the provider's
    prompt: str = ""  # "" for the built-in instructions
    timeout: float = 30.0  # seconds for the summarizer, then the extract

    def trigger(self, token_budget: int) -> int:
        """The uncovered messages' tokens over which a compaction runs; 0: never."""
        triggers = [self.trigger_tokens] if self.trigger_tokens > 0 else []
        if self.trigger_share > 0 and token_budget > 0:
            triggers.append(max(int(self.trigger_share * token_budget), 1))
        return min(triggers) if triggers and self.enabled else 0


@dataclass(frozen=True, slots=True)
class CompactionOptions:
    """A request's compaction; None (and "") takes the server's setting."""

    enabled: bool | None = None
    trigger_tokens: int | None = None
    trigger_share: float | None = None
    keep_messages: int | None = None
    keep_turns: int | None = None
    model: str = ""
    prompt: str = ""
    timeout: float | None = None

    def resolve(self, defaults: CompactionSettings) -> CompactionSettings:
        return CompactionSettings(
            enabled=defaults.enabled if self.enabled is None else self.enabled,
            trigger_tokens=_pick(self.trigger_tokens, defaults.trigger_tokens),
            trigger_share=_pick(self.trigger_share, defaults.trigger_share),
            keep_messages=_pick(self.keep_messages, defaults.keep_messages),
            keep_turns=_pick(self.keep_turns, defaults.keep_turns),
            model=self.model or defaults.model,
            prompt=self.prompt or defaults.prompt,
            timeout=_pick(self.timeout, defaults.timeout),
        )


def _pick(value: T | None, default: T) -> T:
    return default if value is None else value


def check_compaction(
    options: CompactionOptions | CompactionSettings, field: str, violations: Violations
) -> None:
    """Name every field of ``options`` out of range (``field``: where they are)."""
    v = violations
    if options.trigger_tokens is not None and options.trigger_tokens < 0:
        v.add(f"{field}.trigger_tokens", "must not be negative")
    share = options.trigger_share
    if share is not None and not 0 <= share <= 1:
        v.add(f"{field}.trigger_budget_share", "between 0 and 1")
    if options.keep_messages is not None and options.keep_messages < 1:
        v.add(f"{field}.keep_messages", "at least 1")
    if options.keep_turns is not None and options.keep_turns < 0:
        v.add(f"{field}.keep_turns", "must not be negative")
    if len(options.prompt) > MAX_PROMPT_CHARS:
        v.add(f"{field}.prompt", f"at most {MAX_PROMPT_CHARS} characters")
    timeout = options.timeout
    if timeout is not None and not 0 < timeout <= MAX_TIMEOUT:
        v.add(f"{field}.timeout_seconds", f"above 0 and at most {MAX_TIMEOUT:g}")


def plan_compaction(
    messages: Sequence[ChatMessage],
    tokens: Sequence[int],
    turns: Sequence[int],
    settings: CompactionSettings,
    token_budget: int,
) -> int | None:
    """How many of the uncovered ``messages`` (oldest first, with their ``tokens`` and
    turn indexes) to fold, or None when no compaction is due or no cut fits."""
    trigger = settings.trigger(token_budget)
    if not trigger or sum(tokens) <= trigger:
        return None
    if settings.keep_turns > 0:
        newest = sorted(set(turns))[-settings.keep_turns :]
        cut = next(k for k, t in enumerate(turns) if t >= newest[0])
    else:
        cut = len(messages) - settings.keep_messages
    while cut > 0 and not _clean_cut(messages, cut):
        cut -= 1
    return cut if cut > 0 else None


def _clean_cut(messages: Sequence[ChatMessage], cut: int) -> bool:
    """Whether the kept part may start at ``cut``: a user message, and no tool result from
    there on answers a call folded before it."""
    if messages[cut].role is not Role.USER:
        return False
    folded_calls = {c.id for m in messages[:cut] for c in m.tool_calls}
    return not any(m.role is Role.TOOL and m.tool_call_id in folded_calls for m in messages[cut:])


SERVER_DEFAULTS = CompactionSettings()
NO_OPTIONS = CompactionOptions()

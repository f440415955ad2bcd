"""What editing a request asks for, and what a build applies.

A request gives ``EditingOptions``: each field unset (None) takes the server's default
(``EditingSettings`` made from its settings). Capping is on when the cap is positive,
clearing when a trigger is; with both off a build does not look at its tool results.
"""

from __future__ import annotations

from dataclasses import dataclass

from contextd.core.errors import Violations
from contextd.core.pipeline import is_tool_name

# Room for the marker and some text on either side of it.
MIN_CAP_TOKENS = 64
MAX_EXCLUDED_TOOLS = 128


@dataclass(frozen=True, slots=True)
class EditingSettings:
    """Editing as a build applies it. 0 turns capping (``cap_tokens``) or clearing
    (``clear_trigger_tokens``) off."""

    # Most tokens one tool result keeps (its text; the message's framing apart).
    cap_tokens: int = 0
    # History tokens (after capping and earlier clearing) over which a clearing step runs.
    clear_trigger_tokens: int = 0
    # Tool results not yet cleared over which a clearing step runs (one that clears every
    # result it may); 0: no such trigger.
    clear_trigger_tool_uses: int = 0
    # The newest tool results that are never cleared.
    keep_tool_results: int = 3
    # A clearing step frees at least this many tokens, or does not happen: the cached
    # prefix is given up only for a real gain.
    clear_at_least_tokens: int = 4000
    # Clearing a result also empties its call's arguments.
    clear_tool_inputs: bool = False
    # Tools whose results are never cleared (they may still be capped).
    exclude_tools: frozenset[str] = frozenset()

    @property
    def active(self) -> bool:
        return self.cap_tokens > 0 or self.clearing

    @property
    def clearing(self) -> bool:
        return self.clear_trigger_tokens > 0 or self.clear_trigger_tool_uses > 0


OFF = EditingSettings()


@dataclass(frozen=True, slots=True)
class EditingOptions:
    """A request's editing; None takes the server's default. ``exclude_tools`` adds to
    the server's excluded tools."""

    cap_tokens: int | None = None
    clear_trigger_tokens: int | None = None
    clear_trigger_tool_uses: int | None = None
    keep_tool_results: int | None = None
    clear_at_least_tokens: int | None = None
    clear_tool_inputs: bool | None = None
    exclude_tools: tuple[str, ...] = ()

    def resolve(self, defaults: EditingSettings) -> EditingSettings:
        def pick(value: int | None, default: int) -> int:
            return default if value is None else value

        return EditingSettings(
            cap_tokens=pick(self.cap_tokens, defaults.cap_tokens),
            clear_trigger_tokens=pick(self.clear_trigger_tokens, defaults.clear_trigger_tokens),
            clear_trigger_tool_uses=pick(
                self.clear_trigger_tool_uses, defaults.clear_trigger_tool_uses
            ),
            keep_tool_results=pick(self.keep_tool_results, defaults.keep_tool_results),
            clear_at_least_tokens=pick(self.clear_at_least_tokens, defaults.clear_at_least_tokens),
            clear_tool_inputs=(
                defaults.clear_tool_inputs
                if self.clear_tool_inputs is None
                else self.clear_tool_inputs
            ),
            exclude_tools=defaults.exclude_tools | frozenset(self.exclude_tools),
        )


def check_editing(options: EditingOptions, field: str, violations: Violations) -> None:
    """Name every bad field of ``options`` (``field``: where they are in the request)."""
    v = violations
    cap = options.cap_tokens
    if cap is not None and cap != 0 and cap < MIN_CAP_TOKENS:
        v.add(f"{field}.tool_result_cap_tokens", f"0 (no cap) or at least {MIN_CAP_TOKENS}")
    for name, value in (
        ("clear_trigger_tokens", options.clear_trigger_tokens),
        ("clear_trigger_tool_uses", options.clear_trigger_tool_uses),
        ("keep_tool_results", options.keep_tool_results),
        ("clear_at_least_tokens", options.clear_at_least_tokens),
    ):
        if value is not None and value < 0:
            v.add(f"{field}.{name}", "must not be negative")
    if len(options.exclude_tools) > MAX_EXCLUDED_TOOLS:
        v.add(f"{field}.exclude_tools", f"at most {MAX_EXCLUDED_TOOLS} tools")
    for k, name in enumerate(options.exclude_tools[:MAX_EXCLUDED_TOOLS]):
        if not is_tool_name(name):
            v.add(f"{field}.exclude_tools[{k}]", "use 1-64 letters, digits, '_' or '-'")

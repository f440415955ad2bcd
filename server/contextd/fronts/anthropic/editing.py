"""Anthropic's ``context_management`` edits, honoured by contextd's own editing of tool
results (docs/context.md), whatever provider runs the turn; and what it did, reported as
Anthropic reports applied edits.

``clear_tool_uses_20250919`` maps onto clearing: its ``trigger`` (input tokens) is the
history's clearing trigger, ``keep`` the newest tool results kept, ``clear_at_least``
the least a clearing step frees, ``exclude_tools`` and ``clear_tool_inputs`` (true or
false) as they are. Its defaults are Anthropic's: a trigger of 100,000 tokens, three
tool uses kept, no least amount.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contextd.fronts.chat_http import json_fields as jf
from contextd.fronts.chat_http.failure import invalid
from contextd.fronts.chat_http.params import ParamMap
from contextd.v1 import context_pb2 as pb

CLEAR_TOOL_USES = "clear_tool_uses_20250919"
DEFAULT_TRIGGER = 100_000
DEFAULT_KEEP = 3
_EDIT_KEYS = frozenset(
    {"type", "trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"}
)


@dataclass(frozen=True)
class ClearToolUses:
    """The edit asked for, as the native request's editing."""

    native: pb.ContextEditing


def clear_tool_uses(raw: object, params: ParamMap) -> ClearToolUses | None:
    """The request's ``context_management``; None when it asks for no edit."""
    if raw is None:
        return None
    config = jf.obj(raw, "context_management")
    jf.known_keys(config, frozenset({"edits"}), "context_management")
    edits = config.get("edits")
    items = [] if edits is None else jf.array(edits, "context_management.edits")
    if not items:
        return None
    if len(items) > 1:
        raise invalid("context_management.edits", "at most one edit (clear_tool_uses_20250919)")
    at = "context_management.edits[0]"
    edit = jf.obj(items[0], at)
    if edit.get("type") != CLEAR_TOOL_USES:
        raise invalid(
            f"{at}.type", f"only {CLEAR_TOOL_USES} is supported", code="unsupported_parameter"
        )
    jf.known_keys(edit, _EDIT_KEYS, at)
    trigger = _amount(edit.get("trigger"), "input_tokens", f"{at}.trigger", DEFAULT_TRIGGER)
    if trigger < 1:
        raise invalid(f"{at}.trigger.value", "must be at least 1")
    native = pb.ContextEditing(
        clear_trigger_tokens=trigger,
        keep_tool_results=_amount(edit.get("keep"), "tool_uses", f"{at}.keep", DEFAULT_KEEP),
        clear_at_least_tokens=_amount(
            edit.get("clear_at_least"), "input_tokens", f"{at}.clear_at_least"
        ),
        clear_tool_inputs=_clear_inputs(edit.get("clear_tool_inputs"), f"{at}.clear_tool_inputs"),
    )
    excluded = edit.get("exclude_tools")
    if excluded is not None:
        names = jf.array(excluded, f"{at}.exclude_tools")
        native.exclude_tools.extend(
            jf.string(name, f"{at}.exclude_tools[{k}]") for k, name in enumerate(names)
        )
    for name, param in (
        ("clear_trigger_tokens", "trigger.value"),
        ("keep_tool_results", "keep.value"),
        ("clear_at_least_tokens", "clear_at_least.value"),
        ("clear_tool_inputs", "clear_tool_inputs"),
        ("exclude_tools", "exclude_tools"),
    ):
        params.add(f"editing.{name}", f"{at}.{param}")
    return ClearToolUses(native)


def _amount(raw: object, unit: str, at: str, default: int = 0) -> int:
    """``{"type": unit, "value": n}``, n not negative."""
    if raw is None:
        return default
    amount = jf.obj(raw, at)
    jf.known_keys(amount, frozenset({"type", "value"}), at)
    if amount.get("type") != unit:
        raise invalid(f"{at}.type", f"only {unit} is supported", code="unsupported_parameter")
    value = jf.integer(amount.get("value"), f"{at}.value")
    if not 0 <= value <= 2**31 - 1:
        raise invalid(f"{at}.value", "must not be negative")
    return value


def _clear_inputs(raw: object, at: str) -> bool:
    """true or false; a list of tools is refused unless empty (clearing a call's input
    goes for every tool or none)."""
    if raw is None or isinstance(raw, bool):
        return bool(raw)
    if jf.array(raw, at):
        raise invalid(at, "a list of tools is not supported: use true or false")
    return False


def applied_edits(report: pb.BuildReport) -> dict[str, Any]:
    """The response's ``context_management``: the tool uses cleared and the tokens
    freed (a cleared input included), from the report's edits."""
    cleared = [e for e in report.edits if e.kind == pb.EDIT_KIND_CLEARED]
    if not cleared:
        return {"applied_edits": []}
    return {
        "applied_edits": [
            {
                "type": CLEAR_TOOL_USES,
                "cleared_tool_uses": len({e.tool_call_id for e in cleared}),
                "cleared_input_tokens": sum(e.tokens_before - e.tokens_after for e in cleared),
            }
        ]
    }

"""Context editing and compaction settings: plain mappings as their messages.

Keys are the messages' field names; a key left out (or None) leaves the field unset, so
the server's default applies. Values are checked for their type only: the server checks
the ranges and names every bad field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._fields import _int, _sequence, _text, _type_name
from ._pb import chat_pb2 as cpb
from ._pb import context_pb2 as pb

EDITING_INTS = (
    "tool_result_cap_tokens",
    "clear_trigger_tokens",
    "clear_trigger_tool_uses",
    "keep_tool_results",
    "clear_at_least_tokens",
)
EDITING_KEYS = (*EDITING_INTS, "clear_tool_inputs", "exclude_tools")
COMPACTION_INTS = ("trigger_tokens", "keep_messages", "keep_turns")
COMPACTION_FLOATS = ("trigger_budget_share", "timeout_seconds")
COMPACTION_KEYS = (*COMPACTION_INTS, *COMPACTION_FLOATS, "model", "prompt", "enabled")


def editing_to_pb(editing: object, where: str = "editing") -> pb.ContextEditing:
    """``{"tool_result_cap_tokens": 2000, "clear_trigger_tokens": 30000, ...}``."""
    values = _mapping(editing, where, EDITING_KEYS)
    out = pb.ContextEditing()
    for key in EDITING_INTS:
        if values.get(key) is not None:
            setattr(out, key, _int(values[key], f"{where}['{key}']"))
    if values.get("clear_tool_inputs") is not None:
        out.clear_tool_inputs = _bool(values["clear_tool_inputs"], f"{where}['clear_tool_inputs']")
    tools = values.get("exclude_tools") or ()
    out.exclude_tools.extend(
        _text(t, f"{where}['exclude_tools'][{i}]")
        for i, t in enumerate(_sequence(tools, f"{where}['exclude_tools']", "tool names"))
    )
    return out


def compaction_to_pb(compaction: object, where: str = "compaction") -> cpb.CompactionOptions:
    """``{"trigger_budget_share": 0.5, "keep_turns": 2, "model": ..., ...}``."""
    values = _mapping(compaction, where, COMPACTION_KEYS)
    out = cpb.CompactionOptions(
        model=_text(values.get("model"), f"{where}['model']"),
        prompt=_text(values.get("prompt"), f"{where}['prompt']"),
    )
    for key in COMPACTION_INTS:
        if values.get(key) is not None:
            setattr(out, key, _int(values[key], f"{where}['{key}']"))
    for key in COMPACTION_FLOATS:
        value = values.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{where}['{key}'] must be a number, not {_type_name(value)}")
            setattr(out, key, float(value))
    if values.get("enabled") is not None:
        out.enabled = _bool(values["enabled"], f"{where}['enabled']")
    return out


def _mapping(value: object, where: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{where} must be a mapping, not {_type_name(value)}")
    unknown = [str(key) for key in value if key not in keys]
    if unknown:
        raise ValueError(
            f"{where} has no key {', '.join(map(repr, unknown))}; keys are {', '.join(keys)}"
        )
    return value


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{where} must be True or False, not {_type_name(value)}")
    return value

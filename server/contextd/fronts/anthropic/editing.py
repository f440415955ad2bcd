"""Anthropic's ``context_management`` edits, honoured by contextd's own editing of tool
results (docs/context.md), whatever provider runs the turn; and what they did, reported
as Anthropic reports applied edits.

``clear_tool_uses_20250919`` maps onto clearing: its ``trigger`` (``input_tokens``, the
history's clearing trigger, or ``tool_uses``, the tool results not yet cleared over which
a step clears all but the kept ones), ``keep`` the newest tool results kept,
``clear_at_least`` the least a clearing step frees, ``exclude_tools`` and
``clear_tool_inputs`` (true or false) as they are. Its defaults are Anthropic's: a
trigger of 100,000 input tokens, three tool uses kept, no least amount.

``clear_thinking_20251015`` concerns the thinking blocks of earlier assistant turns. No
provider behind contextd is asked to think, and a model is never shown thinking it did
not write, so every such block is left out of what the model sees whatever ``keep``
says (at least one turn, or ``all``): the answer reports each turn whose thinking was
left out, with its tokens. As Anthropic requires, it comes first when both are given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contextd.fronts.chat_http import json_fields as jf
from contextd.fronts.chat_http.failure import invalid
from contextd.fronts.chat_http.params import ParamMap
from contextd.v1 import context_pb2 as pb

CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
DEFAULT_TRIGGER = 100_000
DEFAULT_KEEP = 3
_MAX = 2**31 - 1
_TOOL_USES_KEYS = frozenset(
    {"type", "trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"}
)


@dataclass(frozen=True)
class ContextManagement:
    """The edits asked for: ``tool_uses`` as the native request's editing (None when
    that edit is not asked), ``thinking`` whether clear_thinking is."""

    tool_uses: pb.ContextEditing | None
    thinking: bool


@dataclass
class ThinkingLeftOut:
    """The thinking blocks of a request's assistant turns: how many turns had some,
    their text, and its tokens once counted with the turn's tokenizer."""

    turns: int = 0
    texts: tuple[str, ...] = ()
    tokens: int = 0


def thinking_left_out(messages: list[Any]) -> ThinkingLeftOut:
    """The thinking (and redacted thinking) of the assistant messages of ``messages``,
    a list the request's translation has checked."""
    turns = 0
    texts: list[str] = []
    for k, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        found = len(texts)
        for j, block in enumerate(content):
            at = f"messages[{k}].content[{j}]"
            if block.get("type") == "thinking":
                texts.append(jf.string(block.get("thinking"), f"{at}.thinking"))
            elif block.get("type") == "redacted_thinking":
                texts.append(jf.string(block.get("data"), f"{at}.data"))
        turns += len(texts) > found
    return ThinkingLeftOut(turns, tuple(texts))


def context_management(raw: object, params: ParamMap) -> ContextManagement | None:
    """The request's ``context_management``; None when it asks for no edit."""
    if raw is None:
        return None
    config = jf.obj(raw, "context_management")
    jf.known_keys(config, frozenset({"edits"}), "context_management")
    edits = config.get("edits")
    items = [] if edits is None else jf.array(edits, "context_management.edits")
    tool_uses: pb.ContextEditing | None = None
    thinking = False
    for k, item in enumerate(items):
        at = f"context_management.edits[{k}]"
        edit = jf.obj(item, at)
        kind = edit.get("type")
        if kind == CLEAR_THINKING:
            if k != 0:
                raise invalid(f"{at}.type", f"{CLEAR_THINKING} must be the first edit")
            _thinking_keep(edit, at)
            thinking = True
        elif kind == CLEAR_TOOL_USES:
            if tool_uses is not None:
                raise invalid(f"{at}.type", f"{CLEAR_TOOL_USES} is given twice")
            tool_uses = _clear_tool_uses(edit, at, params)
        else:
            raise invalid(
                f"{at}.type",
                f"must be {CLEAR_TOOL_USES} or {CLEAR_THINKING}",
                code="unsupported_parameter",
            )
    if tool_uses is None and not thinking:
        return None
    return ContextManagement(tool_uses, thinking)


def _thinking_keep(edit: jf.JsonObject, at: str) -> None:
    """``keep``: ``{"type": "thinking_turns", "value": N}`` (N at least 1), ``"all"`` or
    ``{"type": "all"}``; checked only (the model is shown no thinking, see above)."""
    jf.known_keys(edit, frozenset({"type", "keep"}), at)
    keep = edit.get("keep")
    if keep is None or keep == "all":
        return
    if isinstance(keep, str):
        raise invalid(f"{at}.keep", 'must be "all" or an object')
    amount = jf.obj(keep, f"{at}.keep")
    kind = amount.get("type")
    if kind == "all":
        jf.known_keys(amount, frozenset({"type"}), f"{at}.keep")
        return
    if kind != "thinking_turns":
        raise invalid(f"{at}.keep.type", "must be thinking_turns or all")
    jf.known_keys(amount, frozenset({"type", "value"}), f"{at}.keep")
    if not 1 <= jf.integer(amount.get("value"), f"{at}.keep.value") <= _MAX:
        raise invalid(f"{at}.keep.value", "must be at least 1")


def _clear_tool_uses(edit: jf.JsonObject, at: str, params: ParamMap) -> pb.ContextEditing:
    jf.known_keys(edit, _TOOL_USES_KEYS, at)
    native = pb.ContextEditing(
        keep_tool_results=_amount(edit.get("keep"), "tool_uses", f"{at}.keep", DEFAULT_KEEP),
        clear_at_least_tokens=_amount(
            edit.get("clear_at_least"), "input_tokens", f"{at}.clear_at_least"
        ),
        clear_tool_inputs=_clear_inputs(edit.get("clear_tool_inputs"), f"{at}.clear_tool_inputs"),
    )
    _trigger(edit.get("trigger"), f"{at}.trigger", native)
    excluded = edit.get("exclude_tools")
    if excluded is not None:
        names = jf.array(excluded, f"{at}.exclude_tools")
        native.exclude_tools.extend(
            jf.string(name, f"{at}.exclude_tools[{k}]") for k, name in enumerate(names)
        )
    for name, param in (
        ("clear_trigger_tokens", "trigger.value"),
        ("clear_trigger_tool_uses", "trigger.value"),
        ("keep_tool_results", "keep.value"),
        ("clear_at_least_tokens", "clear_at_least.value"),
        ("clear_tool_inputs", "clear_tool_inputs"),
        ("exclude_tools", "exclude_tools"),
    ):
        params.add(f"editing.{name}", f"{at}.{param}")
    return native


def _trigger(raw: object, at: str, native: pb.ContextEditing) -> None:
    """``{"type": "input_tokens" | "tool_uses", "value": n}``, n at least 1; the other
    trigger is turned off (the server's own default is not Anthropic's)."""
    if raw is None:
        native.clear_trigger_tokens = DEFAULT_TRIGGER
        native.clear_trigger_tool_uses = 0
        return
    trigger = jf.obj(raw, at)
    jf.known_keys(trigger, frozenset({"type", "value"}), at)
    kind = trigger.get("type")
    if kind not in ("input_tokens", "tool_uses"):
        raise invalid(f"{at}.type", "must be input_tokens or tool_uses")
    value = jf.integer(trigger.get("value"), f"{at}.value")
    if not 1 <= value <= _MAX:
        raise invalid(f"{at}.value", "must be at least 1")
    native.clear_trigger_tokens = value if kind == "input_tokens" else 0
    native.clear_trigger_tool_uses = value if kind == "tool_uses" else 0


def _amount(raw: object, unit: str, at: str, default: int = 0) -> int:
    """``{"type": unit, "value": n}``, n not negative."""
    if raw is None:
        return default
    amount = jf.obj(raw, at)
    jf.known_keys(amount, frozenset({"type", "value"}), at)
    if amount.get("type") != unit:
        raise invalid(f"{at}.type", f"must be {unit}")
    value = jf.integer(amount.get("value"), f"{at}.value")
    if not 0 <= value <= _MAX:
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


def applied_edits(
    asked: ContextManagement, report: pb.BuildReport, thinking: ThinkingLeftOut
) -> dict[str, Any]:
    """The response's ``context_management``: the thinking turns left out (when asked
    and there were some), then the tool uses cleared and the tokens freed (a cleared
    input included), from the report's edits."""
    applied: list[dict[str, Any]] = []
    if asked.thinking and thinking.turns:
        applied.append(
            {
                "type": CLEAR_THINKING,
                "cleared_thinking_turns": thinking.turns,
                "cleared_input_tokens": thinking.tokens,
            }
        )
    cleared = [e for e in report.edits if e.kind == pb.EDIT_KIND_CLEARED]
    if asked.tool_uses is not None and cleared:
        applied.append(
            {
                "type": CLEAR_TOOL_USES,
                "cleared_tool_uses": len({e.tool_call_id for e in cleared}),
                "cleared_input_tokens": cleared_tokens(report),
            }
        )
    return {"applied_edits": applied}


def cleared_tokens(report: pb.BuildReport) -> int:
    """The tokens the clearing edits of ``report`` freed."""
    return sum(
        e.tokens_before - e.tokens_after for e in report.edits if e.kind == pb.EDIT_KIND_CLEARED
    )

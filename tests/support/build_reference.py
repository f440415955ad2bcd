"""The build rules written out plainly, as the properties' reference model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from contextd.core.build import BuildRequest
from contextd.core.messages import ChatMessage, CompressionSummary, Role
from contextd.core.pipeline import DropReason
from contextd.core.tokens import Tokenizer, message_tokens


def expected_system_text(req: BuildRequest) -> str:
    if req.layers is not None:
        texts = [getattr(req.layers, n) for n in ("identity", "rules", "skill", "mode", "memory")]
        texts.append(req.layers.context)
        return "\n\n".join(t for t in texts if t.strip())
    return "\n".join(p for p in req.system_prompts if p.strip())


def repair_reference(
    history: Sequence[ChatMessage], summary: CompressionSummary | None
) -> tuple[list[tuple[int, ChatMessage]], dict[int, DropReason], set[tuple[int, str]]]:
    """Survivors of repair (index, message), why each other index went, removed calls."""
    reasons: dict[int, DropReason] = {}
    replaced = set(summary.message_ids) if summary else set()
    items = []
    for i, m in enumerate(history):
        if m.id and m.id in replaced:
            reasons[i] = DropReason.COMPRESSED
        elif not m.content.strip() and (
            m.role is Role.USER or (m.role is Role.ASSISTANT and not m.tool_calls)
        ):
            reasons[i] = DropReason.EMPTY
        else:
            items.append((i, m))
    # A result survives only inside the run of results right after its call, once.
    placed: list[tuple[int, ChatMessage]] = []
    waiting: set[str] = set()
    for i, m in items:
        if m.role is Role.TOOL:
            if m.tool_call_id in waiting:
                waiting.discard(m.tool_call_id)
                placed.append((i, m))
            else:
                reasons[i] = DropReason.ORPHANED_TOOL_RESULT
        else:
            waiting = {c.id for c in m.tool_calls}
            placed.append((i, m))
    answered = {m.tool_call_id for _, m in placed if m.role is Role.TOOL}
    survivors: list[tuple[int, ChatMessage]] = []
    removed: set[tuple[int, str]] = set()
    for i, m in placed:
        calls = tuple(c for c in m.tool_calls if c.id in answered)
        removed |= {(i, c.id) for c in m.tool_calls if c.id not in answered}
        if m.tool_calls and not calls and not m.content.strip():
            reasons[i] = DropReason.EMPTY
        else:
            survivors.append((i, replace(m, tool_calls=calls)))
    return survivors, reasons, removed


def unit_start(msgs: Sequence[ChatMessage], end: int) -> int:
    """Index of the first message of the tool-call unit that ends at ``end``."""
    start = end
    while start > 0 and msgs[start].role is Role.TOOL:
        start -= 1
    return start


def pinned_tail(survivors: list[tuple[int, ChatMessage]]) -> int | None:
    """Without a user message: where the last unit (call + results) starts; None if impossible."""
    msgs = [m for _, m in survivors]
    if not msgs or msgs[-1].role is not Role.TOOL:
        return None
    return unit_start(msgs, len(msgs) - 1)


def required_messages(
    req: BuildRequest, survivors: list[tuple[int, ChatMessage]]
) -> list[ChatMessage]:
    """What is kept whatever the budget: system prompt, then user message or pinned tail."""
    system = expected_system_text(req)
    head = [ChatMessage(Role.SYSTEM, system)] if system else []
    if req.user_message.strip():
        return [*head, ChatMessage(Role.USER, req.user_message)]
    start = pinned_tail(survivors)
    return head + ([] if start is None else [m for _, m in survivors[start:]])


def trim_reference(msgs: Sequence[ChatMessage], room: int, tok: Tokenizer) -> int:
    """The budget rule over units: start of the longest suffix of whole units that fits in room."""
    start = len(msgs)
    while start > 0:
        unit = unit_start(msgs, start - 1)
        cost = sum(message_tokens(m, tok) for m in msgs[unit:start])
        if cost > room:
            break
        room -= cost
        start = unit
    return start

"""The build rules written out plainly, as the properties' reference model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from contextd.core.build_request import BuildRequest
from contextd.core.messages import ChatMessage, CompressionSummary, Role
from contextd.core.pipeline import DropReason
from contextd.core.tokens import Tokenizer, message_tokens


def expected_system_text(req: BuildRequest) -> str:
    if req.layers is not None:
        texts = [getattr(req.layers, n) for n in ("identity", "rules", "skill", "mode", "memory")]
        texts.append(req.layers.context)
        return "\n\n".join(t for t in texts if t.strip())
    return "\n".join(p for p in req.system_prompts if p.strip())


Moved = set[tuple[str, int, int]]  # (tool_call_id, from_index, call_index)


def repair_reference(
    history: Sequence[ChatMessage], summary: CompressionSummary | None, anthropic: bool = False
) -> tuple[list[tuple[int, ChatMessage]], dict[int, DropReason], set[tuple[int, str]], Moved]:
    """Survivors of repair (index, message) in their repaired order, why each other index
    went, removed calls, moved results. Blank answers go; blank user messages stay,
    except in the Anthropic format, which cannot carry them."""
    reasons: dict[int, DropReason] = {}
    replaced = set(summary.message_ids) if summary else set()
    items = []
    for i, m in enumerate(history):
        if m.id and m.id in replaced:
            reasons[i] = DropReason.COMPRESSED
        elif not m.content.strip() and (
            (m.role is Role.USER and anthropic and not m.parts)
            or (m.role is Role.ASSISTANT and not m.tool_calls)
        ):
            reasons[i] = DropReason.EMPTY
        else:
            items.append((i, m))
    # A result pairs with the earlier call of its id, if that call has no result yet. It
    # stays if it is in the run of results right after its call's message; otherwise it
    # moves behind that run (moved ones in the order of the message's calls). Any
    # other result is an orphan.
    messages = [(i, m) for i, m in items if m.role is not Role.TOOL]
    caller_of: dict[str, int] = {}  # call id -> history index of its message
    in_place: dict[int, list[tuple[int, ChatMessage]]] = {i: [] for i, _ in messages}
    moved_to: dict[int, list[tuple[int, ChatMessage]]] = {i: [] for i, _ in messages}
    moved: Moved = set()
    run_of: int | None = None
    for i, m in items:
        if m.role is not Role.TOOL:
            run_of = i
            caller_of |= {c.id: i for c in m.tool_calls}
            continue
        owner = caller_of.pop(m.tool_call_id, None)
        if owner is None:
            reasons[i] = DropReason.ORPHANED_TOOL_RESULT
        elif owner == run_of:
            in_place[owner].append((i, m))
        else:
            moved_to[owner].append((i, m))
            moved.add((m.tool_call_id, i, owner))
    placed: list[tuple[int, ChatMessage]] = []
    for i, m in messages:
        order = [c.id for c in m.tool_calls]
        late = sorted(moved_to[i], key=lambda r: order.index(r[1].tool_call_id))
        placed += [(i, m), *in_place[i], *late]
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
    return survivors, reasons, removed, moved


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

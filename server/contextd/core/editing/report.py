"""What an edit did to one message, as the build report lists it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from contextd.core.messages import ChatMessage
from contextd.core.tokens import Tokenizer, message_tokens

if TYPE_CHECKING:
    from contextd.core.editing.edit import EditedHistory


class EditKind(StrEnum):
    # A tool result over the cap, kept to its head and tail around a marker.
    CAPPED = "capped"
    # An old tool result replaced by a placeholder (and its call's arguments, on request).
    CLEARED = "cleared"
    # Messages a compression summary stands in for.
    COMPACTED = "compacted"


@dataclass(frozen=True, slots=True)
class MessageEdit:
    """One edit. ``index`` is the history index of the message (for a compaction, the
    first message replaced, ``count`` of them); tokens are the message's before and
    after, as ``message_tokens`` counts them (for a compaction, the replaced messages'
    and the summary message's)."""

    index: int
    kind: EditKind
    tokens_before: int
    tokens_after: int
    tool_call_id: str = ""
    tool_name: str = ""
    count: int = 1


def compaction_edit(
    replaced: Sequence[int],
    history: Sequence[ChatMessage],
    known: Sequence[int] | None,
    summary_tokens: int,
    tok: Tokenizer,
) -> MessageEdit | None:
    """The compression summary as an edit: the messages it replaces (those of
    ``history``, at ``replaced``) and its own tokens."""
    if not replaced:
        return None
    before = sum(
        known[i] if known is not None else message_tokens(history[i], tok) for i in replaced
    )
    return MessageEdit(
        min(replaced), EditKind.COMPACTED, before, summary_tokens, count=len(replaced)
    )


def kept_edits(
    edited: EditedHistory | None,
    kept: Sequence[int],
    origin: Sequence[int] | None,
    compacted: MessageEdit | None,
) -> list[MessageEdit]:
    """The edits of the messages ``kept`` and the compaction, at the caller's indexes
    (``origin``: the caller's index of each position, when results were moved), in index
    order."""

    def caller(i: int) -> int:
        return i if origin is None else origin[i]

    edits = [] if compacted is None else [replace(compacted, index=caller(compacted.index))]
    if edited is not None:
        keep = set(kept)
        edits += [replace(e, index=caller(e.index)) for e in edited.edits if e.index in keep]
    edits.sort(key=lambda e: e.index)
    return edits


def first_changed(edited: EditedHistory | None, kept: Sequence[int]) -> int | None:
    """Where in ``kept`` the first message the newest clearing step changed is; None
    when no step happened at the history's end, or it changed nothing kept."""
    if edited is None or edited.first_new is None:
        return None
    first_new = edited.first_new
    return next((k for k, i in enumerate(kept) if i >= first_new), None)

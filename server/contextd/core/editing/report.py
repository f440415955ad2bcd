"""What an edit did to one message, as the build report lists it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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

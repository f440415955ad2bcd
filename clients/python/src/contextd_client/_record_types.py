"""The shapes of the stored-record dicts the clients return (TypedDicts: plain dicts at
run time, with their keys and value types known to type checkers)."""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict


class Session(TypedDict):
    """A stored session; times are aware UTC datetimes, ``None`` when unset."""

    id: str
    user_id: str
    scenario: str
    host: str
    title: str
    metadata: dict[str, str]
    create_time: datetime | None
    update_time: datetime | None
    message_count: int


class Memory(TypedDict):
    """A stored memory of a user."""

    id: str
    user_id: str
    content: str
    source_session_id: str
    source_message_id: str
    create_time: datetime | None
    update_time: datetime | None


class AddedMemory(Memory):
    """What ``add_memory`` returns: ``created`` is false when the user had the text."""

    created: bool


class ScoredMemory(Memory):
    """A memory found by ``search_memories``, with its score and the score's parts."""

    score: float
    relevance: float
    recency: float


class Collected(TypedDict):
    """What ``collect`` returns; ``memory_id`` is "" unless the answer was remembered."""

    message_id: str
    is_collected: bool
    memory_id: str

"""The shapes of the stored-record dicts the clients return (TypedDicts: plain dicts at
run time, with their keys and value types known to type checkers)."""

# No "from __future__ import annotations": the annotations must be evaluated for
# NotRequired keys to show as optional in __optional_keys__ at run time.

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

# The enum-like strings below name the values this client knows; each is also open to
# any other string, because a newer server may send a value this client does not know
# (a role number becomes "unknown(N)", a new status or event type arrives as it is).

#: A message's role; "unspecified" or "unknown(N)" from a newer server.
Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
#: How a stored answer was cut short; "" for a complete message.
MessageStatus: TypeAlias = Literal["", "partial", "cancelled", "error", "interrupted"]
#: The ``type`` of an event in a session's log.
EventType: TypeAlias = Literal[
    "session_start",
    "turn_start",
    "assistant",
    "action",
    "observation",
    "final",
    "turn_end",
    "session_end",
]


class MessageToolCall(TypedDict):
    """A tool call of an assistant message; ``arguments`` is JSON text."""

    id: str
    name: str
    arguments: str


class Message(TypedDict):
    """A message read back from the server; the keys after ``content`` are present only
    when set, except ``tokens``. ``parts`` holds its text and image parts (its
    ``content`` then ""), as the README describes them."""

    role: Role | str
    content: str
    tool_calls: NotRequired[list[MessageToolCall]]
    tool_call_id: NotRequired[str]
    parts: NotRequired[list[dict[str, Any]]]
    id: NotRequired[str]
    tokens: int


class StoredMessage(Message):
    """A message of a session, with where and how it is stored (``seq`` counts from 0)."""

    session_id: str
    seq: int
    turn_index: int
    is_collected: bool
    status: MessageStatus | str
    create_time: datetime | None


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
    #: ``{"agent": ..., "app": ...}``: the part of the host it belongs to ("": none).
    scope: dict[str, str]
    metadata: dict[str, str]
    #: When it was true (None: not known / still true), when it is forgotten (None:
    #: never), and the memory that replaced it ("" while it is current).
    valid_from: datetime | None
    valid_to: datetime | None
    expire_time: datetime | None
    superseded_by: str


class MemoryFilter(TypedDict, total=False):
    """Which memories a search or listing considers (every key given must hold): agent,
    app ("": none; absent: any), metadata pairs, time ranges and ``as_of`` (what was true
    then, superseded facts included), times as aware datetimes."""

    agent: str
    app: str
    metadata: dict[str, str]
    created_after: datetime
    created_before: datetime
    updated_after: datetime
    updated_before: datetime
    as_of: datetime


class MemoryChange(TypedDict):
    """One change of a memory's text (``list_memory_history``)."""

    id: str
    memory_id: str
    action: str
    old_content: str
    new_content: str
    replaced_memory_id: str
    method: str
    source_session_id: str
    source_message_id: str
    change_time: datetime | None


class AddedMemory(Memory):
    """What ``add_memory`` returns: ``created`` is false when the user had the text."""

    created: bool


class ScoreParts(TypedDict):
    """What a result's rank started from (``search_memories(..., explain=True)``): its
    term score and cosine, None where that search did not rank it."""

    term_score: float | None
    cosine: float | None


class ScoredMemory(Memory):
    """A memory found by ``search_memories``, with its score and the score's parts."""

    score: float
    relevance: float
    recency: float
    explain: NotRequired[ScoreParts]


class MemoryHits(list[ScoredMemory]):
    """What ``search_memories`` returns: the memories found, best first (a list), and
    ``note``, why they were ranked by their terms alone although the server searches by
    meaning (its embedding provider failed or refused the query); "" otherwise."""

    def __init__(self, found: Iterable[ScoredMemory] = (), note: str = "") -> None:
        super().__init__(found)
        self.note = note


class Collected(TypedDict):
    """What ``collect`` returns; ``memory_id`` is "" unless the answer was remembered."""

    message_id: str
    is_collected: bool
    memory_id: str


class Template(TypedDict):
    """A scenario's system prompt template; ``version`` grows on each change."""

    scenario: str
    system_prompt: str
    version: int
    enabled: bool
    update_time: datetime | None


class Skill(TypedDict):
    """A skill; ``apps`` are the hosts it applies to (empty: every host)."""

    name: str
    description: str
    prompt: str
    apps: list[str]
    enabled: bool
    update_time: datetime | None


class DeletedCounts(TypedDict):
    """What ``delete_user`` erased, by kind (``summaries``: compression and session
    summaries; ``event_logs``: log files)."""

    sessions: int
    messages: int
    summaries: int
    memories: int
    memory_history: int
    event_logs: int
    api_keys: int


class SessionEvent(TypedDict):
    """One event of a session's log; ``ts`` is its UTC time as ISO 8601 text, and the
    keys after ``session_id`` are present only when the event has them."""

    ts: str
    session_id: str
    turn: NotRequired[int]
    step: NotRequired[int]
    type: NotRequired[EventType | str]
    content: NotRequired[str]
    role: NotRequired[Role | str]
    meta: NotRequired[dict[str, Any]]

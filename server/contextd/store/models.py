"""Rows the store reads and writes. Plain dataclasses: no SQL, no grpc; a message's content
parts as the JSON its row keeps (``parts_json``).

The rows a repository keeps in memory and hands to every caller (messages, compression
and session summaries, templates, skills) are frozen, their collections tuples and
read-only mappings: a caller cannot change what the next caller reads. A cache that has to
change one replaces it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from contextd.core.content import ContentPart, ImageDetail, ImagePart, TextPart
from contextd.core.identity import DEFAULT_TENANT
from contextd.core.messages import ChatMessage
from contextd.core.tokens import ESTIMATE, TokenizerRegistry, message_tokens

NO_TOKENS: Mapping[str, int] = MappingProxyType({})

# A session's id, as the store makes it (uuid4().hex); it also names files.
_SESSION_ID = re.compile(r"[0-9a-f]{32}")


def check_session_id(session_id: str) -> str:
    """``session_id`` when it is 32 lowercase hex characters; anything else could name a
    path outside a folder of session files, so it is refused (ValueError)."""
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise ValueError(f"session_id must be 32 lowercase hex characters, got {session_id!r}")
    return session_id


class UsageTotals(NamedTuple):
    """Token usage summed over model calls."""

    # As providers reported it, or counted by contextd where ``estimated``; every input
    # token, the cached ones included.
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_estimate: int = 0  # contextd's own count before each call
    cache_read_tokens: int = 0  # of prompt_tokens: read from the provider's prompt cache
    cache_write_tokens: int = 0  # of prompt_tokens: written to it
    # Some figure was counted by contextd: the provider reported none for a call.
    estimated: bool = False


def token_counts(counts: Mapping[str, int]) -> Mapping[str, int]:
    """A read-only copy of ``counts``."""
    return MappingProxyType(dict(counts)) if counts else NO_TOKENS


@dataclass(slots=True)
class Session:
    id: str
    user_id: str
    scenario: str = ""
    host: str = ""
    title: str = ""
    # Free-form key/value metadata shown to the model in the ``session`` layer.
    metadata: dict[str, str] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
    message_count: int = 0
    # The owner is (tenant_id, user_id): user ids are unique only within a tenant.
    tenant_id: str = DEFAULT_TENANT


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A conversation row: the message plus what the store knows about it.

    ``message`` is a core ChatMessage, not frozen (see contextd.core.messages), and like
    every message never changed: a changed one is a copy.
    """

    id: int
    session_id: str
    user_id: str
    seq: int  # position in its session, from 0
    message: ChatMessage  # message.id is str(id)
    turn_index: int = 0
    is_collected: bool = False
    # "" for complete messages; "partial", "cancelled", "error", "interrupted" for answers
    # cut short.
    status: str = ""
    created_at: float = 0.0
    # Token counts known for this message, by tokenizer name (see ``token_counts``).
    tokens: Mapping[str, int] = field(default_factory=lambda: NO_TOKENS)
    # What the answer was, for the assistant message a StreamChat call ended with; read
    # by list_messages only (None elsewhere).
    answer: AnswerRecord | None = None


@dataclass(frozen=True, slots=True)
class AnswerRecord:
    """What a StreamChat call's stored answer was (answer_records): the model it asked
    for, the turn's usage up to it, and the host's note."""

    model: str
    usage: UsageTotals
    note: str = ""


@dataclass(slots=True)
class NewMessage:
    """A message to append; the store assigns id and seq."""

    message: ChatMessage
    turn_index: int = 0
    status: str = ""
    # Token counts computed by the caller, by tokenizer name, stored with the row.
    tokens: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CompressionSummaryRow:
    id: int
    session_id: str
    message_ids: tuple[int, ...]
    start_message_id: int
    summary: str
    active: bool = True
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class SessionSummary:
    session_id: str
    user_id: str
    summary: str
    updated_at: float = 0.0
    title: str = ""


@dataclass(slots=True)
class Memory:
    id: int
    user_id: str
    content: str
    source_session_id: str = ""
    source_message_id: int = 0
    created_at: float = 0.0
    updated_at: float = 0.0
    tenant_id: str = DEFAULT_TENANT
    # The scope below the user ("": none), the host's labels.
    agent: str = ""
    app: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    # When the fact was true (None: not known / still true), when it is forgotten
    # (None: never), and the memory that replaced it (0: none, it is current).
    valid_from: float | None = None
    valid_to: float | None = None
    expires_at: float | None = None
    superseded_by: int = 0


@dataclass(slots=True)
class ScoredMemory:
    memory: Memory
    # Combined score used for ranking, higher is better.
    score: float
    # Text relevance (higher is better) and recency (1.0 = just now, decaying to 0).
    relevance: float
    recency: float
    # What the ranking started from, for a search that explains itself: the relevance by
    # the query's terms (None: not found by them) and the cosine with the query's vector
    # (None: not ranked by meaning).
    term_score: float | None = None
    cosine: float | None = None


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    scenario: str
    system_prompt: str  # may contain {{variable}} placeholders
    version: int = 1
    enabled: bool = True
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str = ""
    prompt: str = ""
    # Hosts the skill applies to, e.g. ("excel", "word"); empty means every host.
    apps: tuple[str, ...] = ()
    enabled: bool = True
    updated_at: float = 0.0


# A message's content parts as the JSON of the conversation's ``parts`` column.
#
# ``[{"text": "..."}, {"image": {"url": "https://..."} | {"data": <base64>,
# "media_type": "image/png"}, "detail": "auto", "width": 640, "height": 480}]``; NULL when
# the message has no parts.
def parts_json(parts: Sequence[ContentPart]) -> str | None:
    if not parts:
        return None
    return json.dumps([_part_object(p) for p in parts], ensure_ascii=False)


def _part_object(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"text": part.text}
    image: dict[str, Any] = (
        {"url": part.url}
        if part.url
        else {"data": base64.b64encode(part.data).decode("ascii"), "media_type": part.media_type}
    )
    image |= {"detail": part.detail.value, "width": part.width, "height": part.height}
    return {"image": image}


def parts_from_json(text: str | None) -> tuple[ContentPart, ...]:
    if not text:
        return ()
    return tuple(_part(p) for p in json.loads(text))


def _part(obj: dict[str, Any]) -> ContentPart:
    if "text" in obj:
        return TextPart(obj["text"])
    image = obj["image"]
    return ImagePart(
        url=image.get("url", ""),
        data=base64.b64decode(image["data"]) if "data" in image else b"",
        media_type=image.get("media_type", ""),
        detail=ImageDetail(image.get("detail", "auto")),
        width=image.get("width", 0),
        height=image.get("height", 0),
    )


def new_message(
    tokenizers: TokenizerRegistry,
    message: ChatMessage,
    turn_index: int,
    status: str = "",
    tokenizer: str = "",
) -> NewMessage:
    """A row to store, with its counts under the default tokenizer, the estimate and
    ``tokenizer`` (a chat turn's), so that building from the session never tokenizes it
    again."""
    tokens: dict[str, int] = {}
    for name in ("", ESTIMATE, tokenizer):
        tok = tokenizers.get(name)
        if tok.name not in tokens:
            tokens[tok.name] = message_tokens(message, tok)
    return NewMessage(message, turn_index=turn_index, status=status, tokens=tokens)

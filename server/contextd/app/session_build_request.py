"""What a session-mode build is asked (``SessionBuildRequest``, from the server's
``LayerDefaults`` and a request's fields) and what it answers (``BuiltContext``: the
message list with what each ``ContextLayer`` gave). app/session_context.py makes one from
the other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from contextd.app.scope import Caller
from contextd.core.build_request import BuildResult, CacheLayout, OverflowPolicy
from contextd.core.content import ContentPart
from contextd.core.editing import EditingSettings
from contextd.core.editing.settings import OFF as EDITING_OFF
from contextd.core.formats import OutputFormat
from contextd.core.messages import ChatMessage
from contextd.core.tokens import Tokenizer


@dataclass(frozen=True, slots=True)
class LayerDefaults:
    """The server's settings a build starts from."""

    identity: str
    rules: str
    memory_enabled: bool
    memory_limit: int
    recent_sessions_limit: int
    # Tool results capped and cleared, unless a request says otherwise.
    editing: EditingSettings = EDITING_OFF


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionBuildRequest:
    """A build from the stored session ``session_id``: session-mode BuildMessages, and
    each model step of a chat turn."""

    caller: Caller
    session_id: str
    user_message: str
    token_budget: int
    tokenizer: Tokenizer
    scenario: str = ""
    host: str = ""
    variables: Mapping[str, str] = field(default_factory=dict)
    # None: the server's setting.
    memory: bool | None = None
    memory_limit: int = 0
    recent_sessions_limit: int = 0
    output_format: OutputFormat = OutputFormat.NEUTRAL
    overflow_policy: OverflowPolicy = OverflowPolicy.KEEP_REQUIRED
    cache_layout: CacheLayout = CacheLayout.OFF
    # Continue after tool results: no user message. The results are the newest stored
    # messages, or ``pending`` (a chat turn stores them once the context is built, so
    # that a refused turn stores nothing).
    continuation: bool = False
    pending: Sequence[ChatMessage] = ()
    # What the memory layer searches with; None: the user message. A chat step
    # that goes on after tool results or an observation searches with the turn's
    # question instead.
    memory_query: str | None = None
    # The user message's text and images; ``user_message`` is then their text view.
    user_parts: tuple[ContentPart, ...] = ()
    # As BuildRequest's: False for a model that takes no user message without text.
    blank_user_turns: bool = True
    # Tool results capped and cleared (the server's defaults and the request's fields).
    editing: EditingSettings = EDITING_OFF


@dataclass(slots=True)
class ContextLayer:
    name: str
    included: bool = False
    tokens: int = 0
    items_kept: int = 0
    items_dropped: int = 0
    note: str = ""
    # The memory layer's memories, best first, as (text, score); the first
    # ``items_kept`` of them are in the context.
    memories: list[tuple[str, float]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BuiltContext:
    """What a build answers: the message list with its report, and from a stored session
    what each context layer gave (none for a history in the request)."""

    result: BuildResult
    layers: list[ContextLayer]

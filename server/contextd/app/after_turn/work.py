"""What after-turn work is given and keeps: the finished turn and its exchange, the
settings, the counters, and the guard every part of the work runs in."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from contextd.config import Settings
from contextd.core.editing.compaction import (
    NO_OPTIONS,
    SERVER_DEFAULTS,
    CompactionOptions,
    CompactionSettings,
    check_compaction,
)
from contextd.core.errors import InvalidArgument, Violations
from contextd.core.identity import DEFAULT_TENANT
from contextd.core.memory_facts import Line
from contextd.core.messages import Role
from contextd.core.pipeline import is_blank
from contextd.store.conversation import ConversationRepo
from contextd.store.models import StoredMessage

log = logging.getLogger("contextd.after_turn")


@dataclass(frozen=True, slots=True)
class FinishedTurn:
    """A turn that completed with status ok: what background work after it needs."""

    session_id: str
    user_id: str
    turn_index: int
    tokenizer: str = ""  # the turn's tokenizer: the stored counts read with its messages
    tenant_id: str = DEFAULT_TENANT  # the user's tenant: user ids are unique only in one
    token_budget: int = 0  # the turn's prompt budget, for a compaction trigger by share
    compaction: CompactionOptions = NO_OPTIONS  # the turn's request's
    # The session's version as the work read it when it started (None: not read, or no
    # other process writes): its reads of the session's messages name it, so that kept
    # ones answer them (ConversationRepo.tail).
    version: int | None = None


@dataclass(frozen=True, slots=True)
class AfterTurnSettings:
    memories: bool = True  # extract facts into the user's memories
    session_summary: bool = True  # refresh the session's summary (recent_sessions layer)
    compression: bool = True  # write compression summaries
    use_model: bool | None = None  # None: when the provider follows instructions
    max_facts: int = 5  # facts kept per turn
    max_fact_chars: int = 200
    related_memories: int = 10  # existing memories the extraction sees
    compaction: CompactionSettings = SERVER_DEFAULTS  # the server's defaults
    session_summary_chars: int = 600
    compression_summary_chars: int = 4000
    model_timeout: float = 60.0  # seconds per model call
    max_output_tokens: int = 1024
    max_concurrency: int = 2
    max_pending: int = 1000
    shutdown_timeout: float = 10.0

    def __post_init__(self) -> None:
        checks = (
            ("max_facts", self.max_facts >= 1),
            ("max_fact_chars", self.max_fact_chars >= 10),
            ("related_memories", self.related_memories >= 1),
            ("session_summary_chars", self.session_summary_chars >= 50),
            ("compression_summary_chars", self.compression_summary_chars >= 200),
            ("model_timeout", self.model_timeout > 0),
            ("max_output_tokens", self.max_output_tokens >= 1),
            ("max_concurrency", self.max_concurrency >= 1),
            ("max_pending", self.max_pending >= 1),
            ("shutdown_timeout", self.shutdown_timeout >= 0),
        )
        bad = [name for name, ok in checks if not ok]
        v = Violations()
        check_compaction(self.compaction, "compaction", v)
        try:
            v.raise_if_any()
        except InvalidArgument as error:
            bad += [violation.field for violation in error.violations]
        if bad:
            raise ValueError(f"invalid after-turn settings: {', '.join(bad)}")

    @classmethod
    def from_settings(cls, settings: Settings) -> AfterTurnSettings:
        """Memories and session summaries follow ``memory_enabled`` (the ``memory`` and
        ``recent_sessions`` layers read them); compression is always on; model calls get
        ``provider_timeout``, the compaction's summary ``compaction_timeout``."""
        return cls(
            memories=settings.memory_enabled,
            session_summary=settings.memory_enabled,
            model_timeout=settings.provider_timeout,
            shutdown_timeout=settings.shutdown_grace,
            compaction=CompactionSettings(
                trigger_tokens=settings.compaction_trigger_tokens,
                trigger_share=settings.compaction_trigger_share,
                keep_messages=settings.compaction_keep_messages,
                keep_turns=settings.compaction_keep_turns,
                model=settings.compaction_model,
                prompt=settings.compaction_prompt,
                timeout=settings.compaction_timeout,
            ),
        )


@dataclass(slots=True)
class AfterTurnStats:
    """Counters, for logs, metrics and tests; counted through its methods."""

    scheduled: int = 0
    finished: int = 0
    dropped: int = 0  # refused: too many pending, or shutting down
    failures: int = 0  # parts that failed (logged)
    model_fallbacks: int = 0  # model answers unusable: the fallback was used
    facts_added: int = 0
    facts_updated: int = 0
    facts_restated: int = 0
    compressions: int = 0
    session_summaries: int = 0

    def turn_scheduled(self) -> None:
        self.scheduled += 1

    def turn_finished(self) -> None:
        self.finished += 1

    def turn_dropped(self) -> None:
        self.dropped += 1

    def part_failed(self) -> None:
        self.failures += 1

    def model_fell_back(self) -> None:
        self.model_fallbacks += 1

    def fact_added(self) -> None:
        self.facts_added += 1

    def fact_updated(self) -> None:
        self.facts_updated += 1

    def fact_restated(self) -> None:
        self.facts_restated += 1

    def compression_written(self) -> None:
        self.compressions += 1

    def session_summary_written(self) -> None:
        self.session_summaries += 1


@dataclass(frozen=True, slots=True)
class Exchange:
    """The turn's user message and its answer (the text of its assistant messages)."""

    user: StoredMessage
    answer: str

    @classmethod
    async def read(cls, conversation: ConversationRepo, turn: FinishedTurn) -> Exchange | None:
        """None when the turn's user message is not stored (any more)."""
        mine = await conversation.turn_messages(
            turn.session_id,
            turn.turn_index,
            turn.tokenizer,
            tenant_id=turn.tenant_id,
            version=turn.version,
        )
        user = next((r for r in mine if r.message.role is Role.USER), None)
        if user is None:
            return None
        answer = "\n".join(
            r.message.content
            for r in mine
            if r.message.role is Role.ASSISTANT and not r.status and not is_blank(r.message.content)
        )
        return cls(user, answer)


async def newest(
    conversation: ConversationRepo, turn: FinishedTurn, limit: int
) -> list[StoredMessage]:
    """The session's newest messages. The compression check and the summary both read
    them; the repository keeps them in memory, so each reads them afresh."""
    # The turn's tokenizer: the rows its build read are still in memory.
    return await conversation.tail(
        turn.session_id, limit, turn.tokenizer, tenant_id=turn.tenant_id, version=turn.version
    )


def line(row: StoredMessage) -> Line:
    """A stored message as a summary prompt's or an extract's line."""
    m = row.message
    return Line(m.role.value, m.content, tuple(c.name for c in m.tool_calls))


def ids(turn: FinishedTurn) -> dict[str, object]:
    """The turn, for a log record's fields."""
    return {
        "session_id": turn.session_id,
        "tenant_id": turn.tenant_id,
        "user_id": turn.user_id,
        "turn": turn.turn_index,
    }


@contextlib.contextmanager
def guarded(what: str, turn: FinishedTurn, stats: AfterTurnStats) -> Iterator[None]:
    """One part of the work, on its own: a failure is logged (``after-turn <what>
    failed``) and counted, never raised."""
    try:
        yield
    except Exception:
        stats.part_failed()
        log.exception(f"after-turn {what} failed", extra=ids(turn))

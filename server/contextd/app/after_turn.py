"""Background work after a chat turn: atomic memories, compression and session summaries.

``ChatApp`` calls :meth:`AfterTurnRunner.schedule` when a turn ends with status ok; it
creates a task and returns at once, so the turn's completed event never waits for it. Per
turn, in this order, each part on its own (one failing does not stop the others):

1. Memories: facts about the user from the turn's user message and answer
   (``core.memory_facts``). With a provider that follows instructions (its
   ``capabilities``; the offline echo does not) the model extracts them, given the user's
   related memories, and may name one each replaces; otherwise, or when the model fails
   or answers badly, simple first-person patterns in the user's message do. New facts are
   added (``MemoryRepo`` deduplicates: a fact the user already has is only refreshed); a
   replacement is made in place, the old text kept in ``memory_history``
   (``MemoryHistoryRepo.replace``: same memory id, so hosts' ids stay valid and the
   ``memory`` layer never shows both the old and the new text). Every extracted memory
   gets a history row naming its method (``rule-fallback`` or ``llm:<model>``), source
   session and source message (the turn's user message).
2. Compression: when more than ``compress_after_messages`` of the session's messages are
   not covered by its active compression summary, all but the newest
   ``compress_keep_last`` (cut at a user message) are folded, with the previous summary,
   into a new one (``SummaryRepo.add_compression``; the old one becomes inactive).
3. Session summary (the ``recent_sessions`` layer of the user's other sessions shows it):
   rewritten from the session's first user message, its compression summary and its
   newest messages; without a model, an extract of the first user message and the latest
   exchange, labelled as such.

Work for one session runs in turn order in this process (a lock per session); where
other processes share the database, the writes stay safe when theirs run at the same time:
a user's memory writes and a session's summary writes take a lock in the database
(``Database.lock_in_transaction``), a replacement applies only to the text it read, and a
compression summary is written only over the one it was made from. At most
``max_concurrency`` turns are worked on at once; past ``max_pending`` waiting turns, new
ones are dropped with a warning. Every failure is logged on ``contextd.after_turn`` and
never reaches the chat. :meth:`AfterTurnRunner.aclose` waits for the work in progress at
shutdown (up to ``shutdown_timeout``, then cancels it); :meth:`AfterTurnRunner.idle`
waits until nothing is pending.

The session's event log is not written: its event types describe a turn, and this work
happens after the turn's ``turn_end``. Its record is ``memory_history``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from contextd.app.after_turn_model import AfterTurnModel
from contextd.app.chat import FinishedTurn
from contextd.app.memory_embedding import closest_memories
from contextd.config import Settings
from contextd.core.memory_facts import (
    RULE_METHOD,
    Action,
    Decision,
    ExistingMemory,
    Fact,
    Line,
    clean_summary,
    compression_messages,
    extraction_messages,
    extractive_compression,
    extractive_session_summary,
    llm_method,
    parse_facts,
    plan_compression,
    reconcile,
    rule_facts,
    rule_replaces,
    session_summary_messages,
)
from contextd.core.messages import Role
from contextd.core.pipeline import is_blank
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.providers.base import Provider
from contextd.store.conversation import ConversationRepo
from contextd.store.memory.history import MemoryHistoryRepo
from contextd.store.memory.repository import MemoryRepo
from contextd.store.models import StoredMessage
from contextd.store.summaries import SummaryRepo
from contextd.tracing import spans

log = logging.getLogger("contextd.after_turn")

T = TypeVar("T")

# The newest messages a session summary is written from.
SUMMARY_RECENT_MESSAGES = 12


@dataclass(frozen=True, slots=True)
class AfterTurnSettings:
    memories: bool = True  # extract facts into the user's memories
    session_summary: bool = True  # refresh the session's summary (recent_sessions layer)
    compression: bool = True  # write compression summaries
    use_model: bool | None = None  # None: when the provider follows instructions
    max_facts: int = 5  # facts kept per turn
    max_fact_chars: int = 200
    related_memories: int = 10  # existing memories the extraction sees
    compress_after_messages: int = 40  # uncovered messages that trigger a compression
    compress_keep_last: int = 10  # newest messages a compression leaves alone
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
            ("compress_keep_last", self.compress_keep_last >= 1),
            ("compress_after_messages", self.compress_after_messages > self.compress_keep_last),
            ("session_summary_chars", self.session_summary_chars >= 50),
            ("compression_summary_chars", self.compression_summary_chars >= 200),
            ("model_timeout", self.model_timeout > 0),
            ("max_output_tokens", self.max_output_tokens >= 1),
            ("max_concurrency", self.max_concurrency >= 1),
            ("max_pending", self.max_pending >= 1),
            ("shutdown_timeout", self.shutdown_timeout >= 0),
        )
        bad = [name for name, ok in checks if not ok]
        if bad:
            raise ValueError(f"invalid after-turn settings: {', '.join(bad)}")

    @classmethod
    def from_settings(cls, settings: Settings) -> AfterTurnSettings:
        """Memories and session summaries follow ``memory_enabled`` (the ``memory`` and
        ``recent_sessions`` layers read them); compression is always on; model calls get
        ``provider_timeout``."""
        return cls(
            memories=settings.memory_enabled,
            session_summary=settings.memory_enabled,
            model_timeout=settings.provider_timeout,
            shutdown_timeout=settings.shutdown_grace,
        )


@dataclass(slots=True)
class AfterTurnStats:
    """Counters, for logs and tests."""

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


@dataclass(slots=True)
class _Exchange:
    user: StoredMessage
    answer: str


@dataclass(slots=True)
class _SessionLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class AfterTurnRunner:
    def __init__(
        self,
        provider: Provider,
        memories: MemoryRepo,
        summaries: SummaryRepo,
        conversation: ConversationRepo,
        history: MemoryHistoryRepo,
        settings: AfterTurnSettings | None = None,
        metrics: Recorder = NULL_RECORDER,
    ) -> None:
        self.provider = provider
        self.memories = memories
        self.summaries = summaries
        self.conversation = conversation
        self.history = history
        self.settings = settings or AfterTurnSettings()
        self._model = AfterTurnModel(
            provider, self.settings.model_timeout, self.settings.max_output_tokens, metrics
        )
        use = self.settings.use_model
        self.use_model = provider.capabilities.follows_instructions if use is None else use
        self.stats = AfterTurnStats()
        self._tasks: set[asyncio.Task[None]] = set()
        self._task_users: dict[asyncio.Task[None], tuple[str, str]] = {}  # (tenant, user)
        self._locks: dict[str, _SessionLock] = {}
        self._slots = asyncio.Semaphore(self.settings.max_concurrency)
        self._closed = False

    # --- lifecycle ------------------------------------------------------------------------

    def schedule(self, turn: FinishedTurn) -> None:
        """Start the work for ``turn`` in the background and return at once. Never raises."""
        try:
            if self._closed:
                self.stats.dropped += 1
                log.warning("after-turn work refused: shutting down", extra=_ids(turn))
                return
            if len(self._tasks) >= self.settings.max_pending:
                self.stats.dropped += 1
                log.warning(
                    "after-turn work dropped: too many turns pending",
                    extra={**_ids(turn), "pending": len(self._tasks)},
                )
                return
            task = asyncio.get_running_loop().create_task(
                self._run(turn), name=f"after-turn {turn.session_id} #{turn.turn_index}"
            )
            self.stats.scheduled += 1
            self._tasks.add(task)
            self._task_users[task] = (turn.tenant_id, turn.user_id)
            task.add_done_callback(self._done)
        except Exception:
            log.exception("after-turn work could not be scheduled", extra=_ids(turn))

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._task_users.pop(task, None)

    def cancel_user(self, tenant_id: str, user_id: str) -> None:
        """Cancel the pending work of the user's turns: the user is being erased, and
        a memory written after the erasure would outlive it. A turn that ends later
        finds its session gone and does nothing."""
        owner = (tenant_id, user_id)
        mine = [task for task, of in self._task_users.items() if of == owner]
        for task in mine:
            task.cancel()
        if mine:
            log.info("after-turn work cancelled: its user is erased", extra={"turns": len(mine)})

    def working_on(self, session_id: str) -> bool:
        """Whether work for a turn of the session is pending."""
        return session_id in self._locks

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def idle(self) -> None:
        """Wait until no work is pending (including work scheduled while waiting)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def aclose(self, seconds: float | None = None) -> None:
        """Refuse new work, wait up to ``seconds`` (``shutdown_timeout`` when None) for the
        pending work, then cancel what is left: the turns themselves are stored, only the
        memories and summaries of those still waiting are not made. Safe to call twice."""
        self._closed = True
        if not self._tasks:
            return
        tasks = set(self._tasks)
        log.info("waiting for after-turn work", extra={"pending": len(tasks)})
        wait = self.settings.shutdown_timeout if seconds is None else seconds
        _, late = await asyncio.wait(tasks, timeout=max(wait, 0.001))
        if late:
            log.warning("after-turn work cancelled at shutdown", extra={"cancelled": len(late)})
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)

    # --- one turn -------------------------------------------------------------------------

    async def _run(self, turn: FinishedTurn) -> None:
        entry = self._locks.setdefault(turn.session_id, _SessionLock())
        entry.users += 1
        try:
            async with entry.lock, self._slots:
                started = time.monotonic()
                # A trace of its own, linked to the turn's call: the work outlives it.
                with spans.linked_root("contextd.after_turn", {"contextd.turn": turn.turn_index}):
                    await self._work(turn)
                log.debug(
                    "after-turn work done",
                    extra={**_ids(turn), "ms": int((time.monotonic() - started) * 1000)},
                )
        except Exception:  # _work guards its parts; this is a last resort
            self.stats.failures += 1
            log.exception("after-turn work failed", extra=_ids(turn))
        finally:
            entry.users -= 1
            if entry.users == 0:
                self._locks.pop(turn.session_id, None)
            self.stats.finished += 1

    async def _work(self, turn: FinishedTurn) -> None:
        s = self.settings
        # The exchange, the compression check and the summary all read the newest
        # messages; the repository keeps them in memory, so each reads them afresh.
        exchange = await self._guard("reading the turn", turn, self._exchange(turn))
        if exchange is None:
            log.info(
                "after-turn work skipped: the turn's messages were not found", extra=_ids(turn)
            )
            return
        if s.memories:
            await self._guard("memory extraction", turn, self._extract(turn, exchange))
        compressed = ""
        if s.compression:
            compressed = await self._guard("compression", turn, self._compress(turn)) or ""
        if s.session_summary:
            summarize = self._summarize(turn, exchange, compressed)
            await self._guard("session summary", turn, summarize)

    async def _guard(self, what: str, turn: FinishedTurn, work: Coroutine[Any, Any, T]) -> T | None:
        try:
            return await work
        except Exception:
            self.stats.failures += 1
            log.exception(f"after-turn {what} failed", extra=_ids(turn))
            return None

    async def _newest(self, turn: FinishedTurn, limit: int) -> list[StoredMessage]:
        # The turn's tokenizer: the rows its build read are still in memory.
        return await self.conversation.tail(
            turn.session_id, limit, turn.tokenizer, tenant_id=turn.tenant_id
        )

    async def _exchange(self, turn: FinishedTurn) -> _Exchange | None:
        """The turn's user message and its answer (the text of its assistant messages)."""
        mine = await self.conversation.turn_messages(
            turn.session_id, turn.turn_index, turn.tokenizer, tenant_id=turn.tenant_id
        )
        user = next((r for r in mine if r.message.role is Role.USER), None)
        if user is None:
            return None
        answer = "\n".join(
            r.message.content
            for r in mine
            if r.message.role is Role.ASSISTANT and not r.status and not is_blank(r.message.content)
        )
        return _Exchange(user, answer)

    # --- memories -------------------------------------------------------------------------

    async def _extract(self, turn: FinishedTurn, exchange: _Exchange) -> None:
        user_text = exchange.user.message.content
        facts: list[Fact] | None = None
        existing: list[ExistingMemory] = []
        method = RULE_METHOD
        if self.use_model:
            existing = await self._related(turn, [user_text])
            facts = await self._model_facts(turn, user_text, exchange.answer, existing)
            method = llm_method(self.provider.default_model)
        if facts is None:
            method = RULE_METHOD
            facts = rule_facts(
                user_text, max_facts=self.settings.max_facts, max_chars=self.settings.max_fact_chars
            )
            if not facts:
                return
            existing = await self._related(turn, [f.text for f in facts])
            facts = [Fact(f.text, rule_replaces(f.text, existing)) for f in facts]
        owner = (turn.tenant_id, turn.user_id)
        closest, thresholds = await closest_memories(self.memories, owner, [f.text for f in facts])
        decisions = reconcile(facts, existing, closest, thresholds)
        for decision in decisions:
            await self._guard("memory write", turn, self._apply(turn, exchange, decision, method))
        self.memories.changed()  # a rewritten memory needs a new vector
        if decisions:
            log.info(
                "memories written",
                extra={
                    **_ids(turn),
                    "method": method,
                    "decisions": [f"{d.action.value}: {d.fact.text}" for d in decisions],
                },
            )

    async def _related(self, turn: FinishedTurn, queries: Sequence[str]) -> list[ExistingMemory]:
        """The turn's user's memories most related to ``queries``, each once, best first."""
        found: dict[int, ExistingMemory] = {}
        limit = self.settings.related_memories
        for query in queries:
            hits = await self.memories.search(turn.user_id, query, limit, tenant_id=turn.tenant_id)
            for hit in hits:
                found.setdefault(hit.memory.id, ExistingMemory(hit.memory.id, hit.memory.content))
        return list(found.values())

    async def _model_facts(
        self, turn: FinishedTurn, user_text: str, answer: str, existing: list[ExistingMemory]
    ) -> list[Fact] | None:
        """The model's facts, or None (logged) when its answer cannot be used."""
        s = self.settings
        messages = extraction_messages(
            user_text,
            answer,
            [m.text for m in existing],
            max_facts=s.max_facts,
            max_chars=s.max_fact_chars,
        )
        try:
            output = await self._model.complete(messages)
            parsed = parse_facts(output, max_facts=s.max_facts, max_chars=s.max_fact_chars)
        except Exception as error:
            self.stats.model_fallbacks += 1
            log.warning(
                "memory extraction by the model failed; using the rule fallback",
                extra={**_ids(turn), "error": f"{type(error).__name__}: {error}"},
            )
            return None
        if parsed.rejected:
            log.info(
                "facts of the model left out",
                extra={**_ids(turn), "rejected": parsed.rejected},
            )
        return parsed.facts

    async def _apply(
        self, turn: FinishedTurn, exchange: _Exchange, decision: Decision, method: str
    ) -> None:
        session_id, message_id = turn.session_id, exchange.user.id
        text = decision.fact.text
        if decision.action is Action.RESTATE and decision.target is not None:
            text = decision.target.text  # the same in other words: the memory is refreshed
        if decision.action is Action.UPDATE and decision.target is not None:
            done = await self.history.replace(
                decision.target.id,
                turn.user_id,
                decision.target.text,
                text,
                method,
                session_id,
                message_id,
                tenant_id=turn.tenant_id,
            )
            if done is not None:
                self.stats.facts_updated += 1
                return
            # The memory changed or went away since it was read: the fact is simply new.
        memory, created = await self.memories.add(
            turn.user_id, text, session_id, message_id, tenant_id=turn.tenant_id
        )
        if created:
            self.stats.facts_added += 1
            await self.history.record_add(memory, method)
        else:
            self.stats.facts_restated += 1

    # --- summaries ------------------------------------------------------------------------

    async def _compress(self, turn: FinishedTurn) -> str:
        """Write a new compression summary when one is due; return the active summary."""
        s = self.settings
        active = await self.summaries.active_compression(turn.session_id)
        covered = set(active.message_ids) if active else set()
        limit = s.compress_after_messages + 1
        while True:
            rows = await self._newest(turn, limit)
            newest_covered = max((i for i, r in enumerate(rows) if r.id in covered), default=-1)
            if newest_covered >= 0 or len(rows) < limit:
                break
            limit *= 4
        uncovered = rows[newest_covered + 1 :]
        plan = plan_compression(
            [r.message.role.value for r in uncovered],
            s.compress_after_messages,
            s.compress_keep_last,
        )
        previous = active.summary if active else ""
        if plan is None:
            return previous
        fold = uncovered[: plan.fold]
        lines = [_line(r) for r in fold]
        summary = ""
        if self.use_model:
            try:
                output = await self._model.complete(
                    compression_messages(previous, lines, max_chars=s.compression_summary_chars)
                )
                summary = clean_summary(output, s.compression_summary_chars)
            except Exception as error:
                self.stats.model_fallbacks += 1
                log.warning(
                    "compression by the model failed; using an extract",
                    extra={**_ids(turn), "error": f"{type(error).__name__}: {error}"},
                )
        if not summary:
            summary = extractive_compression(previous, lines, s.compression_summary_chars)
        ids = sorted(covered | {r.id for r in fold})
        start = active.start_message_id if active else fold[0].id
        if start not in ids:
            start = ids[0]
        previous_id = active.id if active else 0
        added = await self.summaries.add_compression_after(
            turn.session_id, previous_id, ids, start, summary
        )
        if added is None:
            # Another server sharing the database compressed the session meanwhile.
            log.info("compression summary left: another was written meanwhile", extra=_ids(turn))
            now_active = await self.summaries.active_compression(turn.session_id)
            return now_active.summary if now_active else previous
        self.stats.compressions += 1
        log.info(
            "compression summary written",
            extra={**_ids(turn), "messages": len(ids), "folded": len(fold)},
        )
        return summary

    async def _summarize(self, turn: FinishedTurn, exchange: _Exchange, compressed: str) -> None:
        s = self.settings
        first = await self.conversation.first(turn.session_id, tenant_id=turn.tenant_id)
        first = first or exchange.user
        first_text = first.message.content
        summary = ""
        if self.use_model:
            recent = await self._newest(turn, SUMMARY_RECENT_MESSAGES)
            try:
                output = await self._model.complete(
                    session_summary_messages(
                        first_text,
                        [_line(r) for r in recent],
                        compressed,
                        max_chars=s.session_summary_chars,
                    )
                )
                summary = clean_summary(output, s.session_summary_chars)
            except Exception as error:
                self.stats.model_fallbacks += 1
                log.warning(
                    "session summary by the model failed; using an extract",
                    extra={**_ids(turn), "error": f"{type(error).__name__}: {error}"},
                )
        if not summary:
            summary = extractive_session_summary(
                first_text, exchange.user.message.content, exchange.answer, s.session_summary_chars
            )
        if await self.summaries.upsert_session_summary(
            turn.session_id,
            turn.user_id,
            summary,
            by_host=False,
            tenant_id=turn.tenant_id,
            turn_index=turn.turn_index,
        ):
            self.stats.session_summaries += 1

    # --- the model ------------------------------------------------------------------------


def _line(row: StoredMessage) -> Line:
    m = row.message
    return Line(m.role.value, m.content, tuple(c.name for c in m.tool_calls))


def _ids(turn: FinishedTurn) -> dict[str, object]:
    return {
        "session_id": turn.session_id,
        "tenant_id": turn.tenant_id,
        "user_id": turn.user_id,
        "turn": turn.turn_index,
    }

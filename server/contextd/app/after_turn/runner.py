"""Scheduling after-turn work: a queue, its limits, its shutdown and its counters.

``ChatApp`` hands the runner every turn that ends ok (:meth:`AfterTurnRunner.schedule`);
it creates a task and returns at once, so the turn's completed event never waits for it.
The task runs the jobs in order, each on its own (one failing does not stop the others):
memory extraction (memories.py), compression (compression.py), then the session summary
(session_summary.py), which reads the compression summary.

Work for one session runs in turn order in this process (a lock per session). At most
``max_concurrency`` turns are worked on at once; past ``max_pending`` waiting turns, new
ones are dropped with a warning. :meth:`AfterTurnRunner.aclose` waits for the work in
progress at shutdown (up to ``shutdown_timeout``, then cancels it);
:meth:`AfterTurnRunner.idle` waits until nothing is pending.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass, field

from contextd.app.after_turn.compression import Compression
from contextd.app.after_turn.memories import MemoryExtraction
from contextd.app.after_turn.model import AfterTurnModel, ModelOrRules
from contextd.app.after_turn.session_summary import SessionSummary
from contextd.app.after_turn.work import (
    AfterTurnSettings,
    AfterTurnStats,
    Exchange,
    FinishedTurn,
    guarded,
    ids,
    log,
)
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.providers.base import Provider
from contextd.store.conversation import ConversationRepo
from contextd.store.memory.history import MemoryHistoryRepo
from contextd.store.memory.repository import MemoryRepo
from contextd.store.summaries import SummaryRepo
from contextd.tracing import spans


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
        self.settings = s = settings or AfterTurnSettings()
        self.stats = AfterTurnStats()
        use = s.use_model
        self.use_model = provider.capabilities.follows_instructions if use is None else use
        model = ModelOrRules(
            AfterTurnModel(provider, s.model_timeout, s.max_output_tokens, metrics),
            self.use_model,
            self.stats,
        )
        self._conversation = conversation
        self._extraction = MemoryExtraction(memories, history, model, s, self.stats)
        self._compression = Compression(conversation, summaries, model, s, self.stats)
        self._summary = SessionSummary(conversation, summaries, model, s, self.stats)
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
                self.stats.turn_dropped()
                log.warning("after-turn work refused: shutting down", extra=ids(turn))
                return
            if len(self._tasks) >= self.settings.max_pending:
                self.stats.turn_dropped()
                log.warning(
                    "after-turn work dropped: too many turns pending",
                    extra={**ids(turn), "pending": len(self._tasks)},
                )
                return
            task = asyncio.get_running_loop().create_task(
                self._run(turn), name=f"after-turn {turn.session_id} #{turn.turn_index}"
            )
            self.stats.turn_scheduled()
            self._tasks.add(task)
            self._task_users[task] = (turn.tenant_id, turn.user_id)
            task.add_done_callback(self._done)
        except Exception:
            log.exception("after-turn work could not be scheduled", extra=ids(turn))

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
                if log.isEnabledFor(logging.DEBUG):  # its fields cost more than the check
                    log.debug(
                        "after-turn work done",
                        extra={**ids(turn), "ms": int((time.monotonic() - started) * 1000)},
                    )
        except Exception:  # _work guards its parts; this is a last resort
            self.stats.part_failed()
            log.exception("after-turn work failed", extra=ids(turn))
        finally:
            entry.users -= 1
            if entry.users == 0:
                self._locks.pop(turn.session_id, None)
            self.stats.turn_finished()

    async def _work(self, turn: FinishedTurn) -> None:
        s = self.settings
        stats = self.stats
        exchange = None
        with guarded("reading the turn", turn, stats):
            # One read of the session's version, then its messages as this process keeps
            # them (where replicas share the database; nothing to read on SQLite).
            version = await self._conversation.current_version(
                turn.session_id, tenant_id=turn.tenant_id
            )
            turn = dataclasses.replace(turn, version=version)
            exchange = await Exchange.read(self._conversation, turn)
        if exchange is None:
            log.info("after-turn work skipped: the turn's messages were not found", extra=ids(turn))
            return
        if s.memories:
            with guarded("memory extraction", turn, stats):
                await self._extraction.run(turn, exchange)
        compressed = ""
        if s.compression:
            with guarded("compression", turn, stats):
                compressed = await self._compression.run(turn)
        if s.session_summary:
            with guarded("session summary", turn, stats):
                await self._summary.run(turn, exchange, compressed)

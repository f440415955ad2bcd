"""After a turn, compression: when more than ``compress_after_messages`` of the session's
messages are not covered by its active compression summary, all but the newest
``compress_keep_last`` (cut at a user message) are folded, with the previous summary,
into a new one (``SummaryRepo.add_compression``; the old one becomes inactive). The model
writes it; without one, or when it fails, an extract of the messages does.

A compression summary is written only over the one it was made from, so that another
process sharing the database may compress the same session at the same time.
"""

from __future__ import annotations

import functools

from contextd.app.after_turn.model import ModelOrRules
from contextd.app.after_turn.work import (
    AfterTurnSettings,
    AfterTurnStats,
    FinishedTurn,
    ids,
    line,
    log,
    newest,
)
from contextd.core.memory_facts import (
    clean_summary,
    compression_messages,
    extractive_compression,
    plan_compression,
)
from contextd.store.conversation import ConversationRepo
from contextd.store.summaries import SummaryRepo


class Compression:
    def __init__(
        self,
        conversation: ConversationRepo,
        summaries: SummaryRepo,
        model: ModelOrRules,
        settings: AfterTurnSettings,
        stats: AfterTurnStats,
    ) -> None:
        self._conversation = conversation
        self._summaries = summaries
        self._model = model
        self._settings = settings
        self._stats = stats

    async def run(self, turn: FinishedTurn) -> str:
        """Write a new compression summary when one is due; return the active summary."""
        s = self._settings
        active = await self._summaries.active_compression(turn.session_id)
        covered = set(active.message_ids) if active else set()
        limit = s.compress_after_messages + 1
        while True:
            rows = await newest(self._conversation, turn, limit)
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
        lines = [line(r) for r in fold]
        summary = None
        if self._model.used:
            messages = compression_messages(previous, lines, max_chars=s.compression_summary_chars)
            read = functools.partial(clean_summary, max_chars=s.compression_summary_chars)
            failure = "compression by the model failed; using an extract"
            summary = await self._model.ask(turn, messages, read, failure)
        if not summary:
            summary = extractive_compression(previous, lines, s.compression_summary_chars)
        message_ids = sorted(covered | {r.id for r in fold})
        start = active.start_message_id if active else fold[0].id
        if start not in message_ids:
            start = message_ids[0]
        previous_id = active.id if active else 0
        added = await self._summaries.add_compression_after(
            turn.session_id, previous_id, message_ids, start, summary
        )
        if added is None:
            # Another server sharing the database compressed the session meanwhile.
            log.info("compression summary left: another was written meanwhile", extra=ids(turn))
            now_active = await self._summaries.active_compression(turn.session_id)
            return now_active.summary if now_active else previous
        self._stats.compression_written()
        log.info(
            "compression summary written",
            extra={**ids(turn), "messages": len(message_ids), "folded": len(fold)},
        )
        return summary

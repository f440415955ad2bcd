"""After a turn, the session's summary (the ``recent_sessions`` layer of the user's other
sessions shows it): rewritten by the model from the session's first user message, its
compression summary and its newest messages; without a model, or when it fails, an
extract of the first user message and the latest exchange, labelled as such. A summary the
host set is kept (``SummaryRepo.upsert_session_summary``)."""

from __future__ import annotations

import functools

from contextd.app.after_turn.model import SummaryJob
from contextd.app.after_turn.work import (
    Exchange,
    FinishedTurn,
    line,
    newest,
)
from contextd.core.errors import SessionNotFound
from contextd.core.memory_facts import (
    clean_summary,
    extractive_session_summary,
    session_summary_messages,
)

# The newest messages a session summary is written from.
SUMMARY_RECENT_MESSAGES = 12


class SessionSummary(SummaryJob):
    async def run(self, turn: FinishedTurn, exchange: Exchange, compressed: str) -> None:
        """``compressed``: the session's active compression summary ("" when none)."""
        s = self._settings
        first = await self._conversation.first(
            turn.session_id, tenant_id=turn.tenant_id, version=turn.version
        )
        first_text = (first or exchange.user).message.content
        summary = None
        if self._model.used:
            recent = await newest(self._conversation, turn, SUMMARY_RECENT_MESSAGES)
            messages = session_summary_messages(
                first_text,
                [line(r) for r in recent],
                compressed,
                max_chars=s.session_summary_chars,
            )
            read = functools.partial(clean_summary, max_chars=s.session_summary_chars)
            failure = "session summary by the model failed; using an extract"
            summary = await self._model.ask(turn, messages, read, failure)
        if not summary:
            summary = extractive_session_summary(
                first_text, exchange.user.message.content, exchange.answer, s.session_summary_chars
            )
        try:
            written = await self._summaries.upsert_session_summary(
                turn.session_id,
                turn.user_id,
                summary,
                by_host=False,
                tenant_id=turn.tenant_id,
                turn_index=turn.turn_index,
            )
        except SessionNotFound:
            return  # deleted while its turn's work ran: nothing to summarize
        if written:
            self._stats.session_summary_written()

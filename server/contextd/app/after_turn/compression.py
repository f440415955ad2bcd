"""After a turn, compaction: when the session's messages its active compression summary
does not cover are over the trigger (core/editing/compaction.py: in tokens, or as a share
of the turn's budget; the server's settings, each overridable by the turn's request), all
but the newest messages or turns kept verbatim (cut at a user message, never between a
tool call and its results) are folded, with the previous summary, into a new one
(``SummaryRepo.add_compression``; the old one becomes inactive). The model writes it (the
compaction's own model and instructions when set), within the compaction's timeout;
without a model, or when it fails or takes too long, an extract of the messages does, so
a compaction never fails for its summarizer.

A compression summary is written only over the one it was made from, so that another
process sharing the database may compress the same session at the same time.
"""

from __future__ import annotations

import functools

from contextd.app.after_turn.model import SummaryJob
from contextd.app.after_turn.work import (
    FinishedTurn,
    ids,
    line,
    log,
    newest,
)
from contextd.core.editing.compaction import plan_compaction
from contextd.core.memory_facts import (
    clean_summary,
    compression_messages,
    extractive_compression,
)
from contextd.core.messages import ChatMessage, Role
from contextd.core.tokens import EstimateTokenizer, message_tokens
from contextd.store.models import StoredMessage

# Messages read first when looking for those the summary does not cover; grows 4x.
_FIRST_READ = 64


class Compression(SummaryJob):
    async def run(self, turn: FinishedTurn) -> str:
        """Write a new compression summary when one is due; return the active summary."""
        s = self._settings
        compaction = turn.compaction.resolve(s.compaction)
        active = await self._summaries.active_compression(turn.session_id, version=turn.version)
        previous = active.summary if active else ""
        if not compaction.trigger(turn.token_budget):
            return previous
        covered = set(active.message_ids) if active else set()
        limit = _FIRST_READ
        while True:
            rows = await newest(self._conversation, turn, limit)
            newest_covered = max((i for i, r in enumerate(rows) if r.id in covered), default=-1)
            if newest_covered >= 0 or len(rows) < limit:
                break
            limit *= 4
        uncovered = rows[newest_covered + 1 :]
        fold_count = plan_compaction(
            [r.message for r in uncovered],
            [_tokens(r, turn.tokenizer) for r in uncovered],
            [r.turn_index for r in uncovered],
            compaction,
            turn.token_budget,
        )
        if fold_count is None:
            return previous
        fold = uncovered[:fold_count]
        lines = [line(r) for r in fold]
        summary = None
        if self._model.used:
            messages = compression_messages(previous, lines, max_chars=s.compression_summary_chars)
            if compaction.prompt:
                messages[0] = ChatMessage(Role.SYSTEM, compaction.prompt)
            read = functools.partial(clean_summary, max_chars=s.compression_summary_chars)
            failure = "compression by the model failed; using an extract"
            summary = await self._model.ask(
                turn, messages, read, failure, model=compaction.model, seconds=compaction.timeout
            )
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


def _tokens(row: StoredMessage, tokenizer: str) -> int:
    """The row's stored count under the turn's tokenizer (a turn stores its messages
    with it); the byte estimate for a row stored without one."""
    known = row.tokens.get(tokenizer)
    return known if known is not None else message_tokens(row.message, _ESTIMATE)


_ESTIMATE = EstimateTokenizer()

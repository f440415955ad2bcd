"""answer_records: what a StreamChat call's stored answer was, one row beside the
assistant message the call ended with (written in the answer's transaction, gone with
the message). Written with the answer, by store/conversation.py; read here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from contextd.store.engine.database import Database
from contextd.store.models import AnswerRecord, UsageTotals

COLUMNS = (
    "message_id, model, prompt_tokens, completion_tokens, prompt_tokens_estimate,"
    " cache_read_tokens, cache_write_tokens, estimated, note"
)
# Ids per query: well under SQLite's and PostgreSQL's parameter limits.
_CHUNK = 500


async def of_messages(db: Database, message_ids: Iterable[int]) -> Mapping[int, AnswerRecord]:
    """The records of those of ``message_ids`` that have one, by message id."""
    ids = list(message_ids)
    found: dict[int, AnswerRecord] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        rows = await db.reader.execute_fetchall(
            f"SELECT {COLUMNS} FROM answer_records WHERE message_id IN ({marks})", chunk
        )
        for row in rows:
            usage = UsageTotals(
                int(row[2]), int(row[3]), int(row[4]), int(row[5]), int(row[6]), bool(row[7])
            )
            found[int(row[0])] = AnswerRecord(str(row[1]), usage, str(row[8]))
    return found

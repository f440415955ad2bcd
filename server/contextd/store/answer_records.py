"""answer_records: what a StreamChat call's stored answer was, one row beside the
assistant message the call ended with (written in the answer's transaction, gone with
the message)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from contextd.store.engine.database import Connection, Database
from contextd.store.models import AnswerRecord, UsageTotals

_COLUMNS = (
    "message_id, model, prompt_tokens, completion_tokens, prompt_tokens_estimate,"
    " cache_read_tokens, cache_write_tokens, estimated, note"
)
# Ids per query: well under SQLite's and PostgreSQL's parameter limits.
_CHUNK = 500


async def insert(conn: Connection, message_id: int, record: AnswerRecord) -> None:
    """The answer's record, inside the caller's transaction."""
    await conn.execute(
        f"INSERT INTO answer_records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (message_id, *_values(record)),
    )


def in_with(added: str, record: AnswerRecord) -> tuple[str, tuple[object, ...]]:
    """The record as a part of a WITH statement (PostgreSQL), kept with the last message
    of ``added`` (a part that inserted messages, returning their id and seq); and its
    parameters."""
    # The casts give PostgreSQL the numbers' type (a SELECT list's parameters are text).
    numbers = ", ".join(["CAST(? AS BIGINT)"] * 5)
    sql = (
        f"INSERT INTO answer_records ({_COLUMNS})"
        f" SELECT a.id, ?, {numbers}, CAST(? AS INTEGER), ?"
        f" FROM {added} a ORDER BY a.seq DESC LIMIT 1"
    )
    return sql, _values(record)


def _values(record: AnswerRecord) -> tuple[object, ...]:
    u = record.usage
    return (
        record.model,
        u.prompt_tokens,
        u.completion_tokens,
        u.prompt_tokens_estimate,
        u.cache_read_tokens,
        u.cache_write_tokens,
        int(u.estimated),
        record.note,
    )


async def of_messages(db: Database, message_ids: Iterable[int]) -> Mapping[int, AnswerRecord]:
    """The records of those of ``message_ids`` that have one, by message id."""
    ids = list(message_ids)
    found: dict[int, AnswerRecord] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        rows = await db.reader.execute_fetchall(
            f"SELECT {_COLUMNS} FROM answer_records WHERE message_id IN ({marks})", chunk
        )
        for row in rows:
            usage = UsageTotals(
                int(row[2]), int(row[3]), int(row[4]), int(row[5]), int(row[6]), bool(row[7])
            )
            found[int(row[0])] = AnswerRecord(str(row[1]), usage, str(row[8]))
    return found

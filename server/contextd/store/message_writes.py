"""How messages are written: the statements that store a chunk of a session's messages
with their token counts (and an answer's record) at the end of the session
(store/conversation.py's ``append``), inside a transaction, or, where writes go in WITH
(PostgreSQL), a whole write as one statement that commits by itself."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from contextd.core.errors import SessionNotFound
from contextd.core.messages import ChatMessage, ToolCall
from contextd.store.answer_records import COLUMNS as ANSWER_COLUMNS
from contextd.store.engine.database import Connection, JoinedWrite, Row
from contextd.store.models import (
    AnswerRecord,
    NewMessage,
    StoredMessage,
    UsageTotals,
    parts_json,
    token_counts,
)
from contextd.store.sessions import USAGE_ADDED_SQL, USAGE_TOTALS_SQL, usage_added

# Rows per INSERT statement: 8 parameters a row, 4,000 in all, far below SQLite's 32,766.
INSERT_CHUNK = 500

# The unique index a message's seq takes: the one statement of a write whose next seq was
# read before another writer's messages committed conflicts on it.
SEQ_INDEX = "conversation_session_seq"


def _tool_calls_json(calls: Sequence[ToolCall]) -> str | None:
    if not calls:
        return None
    return json.dumps(
        [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls],
        ensure_ascii=False,
    )


async def insert(
    conn: Connection,
    session_id: str,
    owner: tuple[str, str],
    messages: Sequence[NewMessage],
    counts_with: bool,
) -> list[StoredMessage]:
    """Insert the messages and their token counts inside the caller's transaction;
    ``owner`` is the session's (tenant_id, user_id). ``counts_with``: the counts go in
    the messages' statement (``Database.writes_in_with``), one round trip, not two."""
    now = time.time()
    stored: list[StoredMessage] = []
    for start in range(0, len(messages), INSERT_CHUNK):
        chunk = messages[start : start + INSERT_CHUNK]
        sql, params = insert_statement(session_id, owner, chunk, now, counts_with)
        rows = await conn.execute_fetchall(sql, params)
        if not rows:  # the join on sessions found no such session of this user
            raise SessionNotFound(session_id)
        stored += stored_new(session_id, owner[1], chunk, rows, now)
    token_rows = [(item.id, name, count) for item in stored for name, count in item.tokens.items()]
    if token_rows and not counts_with:
        await conn.executemany(
            "INSERT INTO message_tokens (message_id, tokenizer, tokens) VALUES (?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            token_rows,
        )
    return stored


def stored_new(
    session_id: str,
    user_id: str,
    chunk: Sequence[NewMessage],
    rows: Sequence[Row],
    now: float,
) -> list[StoredMessage]:
    """The messages of ``chunk`` as stored, from the ``id`` and ``seq`` of their rows."""
    # The chunk's seqs are contiguous from its first one, in the chunk's order.
    ids = {row["seq"]: row["id"] for row in rows}
    first = min(ids)
    stored: list[StoredMessage] = []
    for ordinal, new in enumerate(chunk):
        seq = first + ordinal
        mid = ids[seq]
        message = new.message
        stored.append(
            StoredMessage(
                id=mid,
                session_id=session_id,
                user_id=user_id,
                seq=seq,
                message=ChatMessage(
                    role=message.role,
                    content=message.content,
                    tool_calls=tuple(message.tool_calls),
                    tool_call_id=message.tool_call_id,
                    id=str(mid),
                    parts=message.parts,
                ),
                turn_index=new.turn_index,
                status=new.status,
                created_at=now,
                tokens=token_counts(new.tokens),
            )
        )
    return stored


def _batch(chunk: Sequence[NewMessage], counts_with: bool) -> tuple[str, list[object]]:
    """The ``batch`` CTE of a chunk of messages (their ordinals, columns and, with
    ``counts_with``, their token counts as a JSON object), and its parameters."""
    # The casts give PostgreSQL the numbers' type (a VALUES list's parameters are text).
    row = "CAST(? AS INTEGER), ?, ?, ?, ?, CAST(? AS INTEGER), ?, ?"
    if counts_with:
        row += ", ?"
    values = ", ".join([f"({row})"] * len(chunk))
    params: list[object] = []
    for ordinal, new in enumerate(chunk):
        m = new.message
        params += [
            ordinal,
            m.role.value,
            m.content,
            _tool_calls_json(m.tool_calls),
            m.tool_call_id,
            new.turn_index,
            new.status,
            parts_json(m.parts),
        ]
        if counts_with:
            params.append(json.dumps(dict(new.tokens)))
    columns = "ordinal, role, content, tool_calls, tool_call_id, turn_index, status, parts"
    if counts_with:
        columns += ", tokens"
    return f"batch({columns}) AS (VALUES {values})", params


# The session's next seq, read before any row is written. Parameter: the session.
_NEXT_SEQ = (
    "base(next_seq) AS MATERIALIZED ("
    "  SELECT COALESCE(MAX(seq), -1) + 1 FROM conversation WHERE session_id = ?)"
)
_CONVERSATION_COLUMNS = (
    "conversation (session_id, tenant_id, user_id, seq, role, content,"
    "  tool_calls, tool_call_id, turn_index, status, parts, created_at, updated_at)"
)
_BATCH_VALUES = (
    "base.next_seq + b.ordinal, b.role, b.content, b.tool_calls, b.tool_call_id,"
    " b.turn_index, b.status, b.parts, ?, ?"
)
# The counts' rows join the inserted ones (``added``) by seq; their foreign key is checked
# at the statement's end, when the messages are there.
_COUNTED = (
    "counted AS (INSERT INTO message_tokens (message_id, tokenizer, tokens)"
    "  SELECT a.id, t.key, CAST(t.value AS BIGINT)"
    "  FROM added a, base, batch b, json_each_text(CAST(b.tokens AS JSON)) t"
    "  WHERE a.seq = base.next_seq + b.ordinal ON CONFLICT DO NOTHING)"
)


def insert_statement(
    session_id: str,
    owner: tuple[str, str],
    chunk: Sequence[NewMessage],
    now: float,
    counts_with: bool = False,
) -> tuple[str, list[object]]:
    """One INSERT ... RETURNING for a chunk of messages, seqs following the session's last.

    The new rows come from a VALUES list joined to the session row (so nothing is inserted
    when the session is missing or another user's, of its tenant or another) and to the
    session's current last seq, read before any row is written. With ``counts_with``
    each row's token counts (a JSON object) go in the same statement.
    """
    batch, params = _batch(chunk, counts_with)
    params = [session_id, *params, now, now, session_id, *owner]
    insert = (
        f" INSERT INTO {_CONVERSATION_COLUMNS}"
        f" SELECT s.id, s.tenant_id, s.user_id, {_BATCH_VALUES}"
        " FROM batch b, base, sessions s WHERE s.id = ? AND s.tenant_id = ? AND s.user_id = ?"
        " RETURNING id, seq"
    )
    head = f"WITH {_NEXT_SEQ}, {batch}"
    if not counts_with:
        return head + insert, params
    return f"{head}, added AS ({insert}), {_COUNTED} SELECT id, seq FROM added", params


def one_statement(
    session_id: str,
    owner: tuple[str, str],
    messages: Sequence[NewMessage],
    usage: UsageTotals | None,
    also: JoinedWrite | None,
    now: float,
    answer: AnswerRecord | None = None,
) -> tuple[str, list[object]]:
    """``_append``'s transaction as one WITH statement (PostgreSQL): ``written`` moves the
    session's version on (and adds ``usage``) and holds its row, which must be the
    owner's; the messages with their counts, ``also`` and the ``answer``'s record (kept
    with the last message) are written only with it. Its
    rows: the version (and the totals, with ``usage``) with each message's id and seq.

    The next seq is read in the statement's snapshot, which may come before another
    writer's messages committed: the insert then conflicts on the seq's unique index,
    nothing is written (KeyConflict), and the caller writes in a transaction that reads
    the next seq under the session's row lock."""
    sets = "version = version + 1"
    returning = "id, tenant_id, user_id, version"
    params: list[object] = []
    if usage is not None:
        sets = f"{USAGE_ADDED_SQL}, {sets}"
        returning += f", {USAGE_TOTALS_SQL}"
        params += usage_added(usage)
    params += [session_id, *owner]
    parts = [
        f"written AS (UPDATE sessions SET {sets} WHERE id = ? AND tenant_id = ? AND user_id = ?"
        f" RETURNING {returning})"
    ]
    selected = "w.version" + (f", {_prefixed(USAGE_TOTALS_SQL, 'w.')}" if usage else "")
    tail = " FROM written w"
    if messages:
        batch, batch_params = _batch(messages, counts_with=True)
        parts += [
            _NEXT_SEQ,
            batch,
            f"added AS (INSERT INTO {_CONVERSATION_COLUMNS}"
            f" SELECT w.id, w.tenant_id, w.user_id, {_BATCH_VALUES}"
            " FROM batch b, base, written w RETURNING id, seq)",
            _COUNTED,
        ]
        params += [session_id, *batch_params, now, now]
        selected += ", a.id, a.seq"
        tail += " JOIN added a ON TRUE"
    if also is not None:
        parts.append(f"joined AS ({also.in_with})")
        params += also.params
    if answer is not None and messages:
        recorded, recorded_params = _answer_in_with("added", answer)
        parts.append(f"recorded AS ({recorded})")
        params += recorded_params
    return f"WITH {', '.join(parts)} SELECT {selected}{tail}", params


# An answer's record (store/answer_records.py), written with the answer's message.


async def insert_answer_record(conn: Connection, message_id: int, record: AnswerRecord) -> None:
    """The answer's record, inside the caller's transaction."""
    await conn.execute(
        f"INSERT INTO answer_records ({ANSWER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (message_id, *_answer_values(record)),
    )


def _answer_in_with(added: str, record: AnswerRecord) -> tuple[str, tuple[object, ...]]:
    """The record as a part of a WITH statement (PostgreSQL), kept with the last message
    of ``added`` (a part that inserted messages, returning their id and seq); and its
    parameters."""
    # The casts give PostgreSQL the numbers' type (a SELECT list's parameters are text).
    numbers = ", ".join(["CAST(? AS BIGINT)"] * 5)
    sql = (
        f"INSERT INTO answer_records ({ANSWER_COLUMNS})"
        f" SELECT a.id, ?, {numbers}, CAST(? AS INTEGER), ?"
        f" FROM {added} a ORDER BY a.seq DESC LIMIT 1"
    )
    return sql, _answer_values(record)


def _answer_values(record: AnswerRecord) -> tuple[object, ...]:
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


def _prefixed(columns: str, prefix: str) -> str:
    return ", ".join(prefix + name.strip() for name in columns.split(","))

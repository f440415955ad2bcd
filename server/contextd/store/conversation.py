"""The conversation table's writes: every user, assistant and tool message of a session,
stored in order with its token counts (``ConversationRepo``, which answers the reads of
store/conversation_reads.py too and tells its kept rows of every write once it committed),
and the statements that write them: a chunk of messages with their counts (and an
answer's record) at the end of the session inside a transaction, or, where writes go in
WITH (PostgreSQL), a whole write as one statement that commits by itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence

from contextd.core.errors import SessionNotFound
from contextd.core.identity import DEFAULT_TENANT
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.store.answer_records import COLUMNS as ANSWER_COLUMNS
from contextd.store.conversation_reads import (
    ALL_TOKENS,
    COLUMNS,
    ConversationReads,
    with_all_tokens,
)
from contextd.store.engine.database import Connection, JoinedWrite, KeyConflict, Row
from contextd.store.models import (
    AnswerRecord,
    NewMessage,
    StoredMessage,
    UsageTotals,
    parts_json,
    token_counts,
)
from contextd.store.sessions import (
    USAGE_ADDED_SQL,
    USAGE_TOTALS_SQL,
    add_usage,
    totals_from_row,
    usage_added,
)

# Rows per INSERT statement: 8 parameters a row, 4,000 in all, far below SQLite's 32,766.
INSERT_CHUNK = 500

# The unique index a message's seq takes: the one statement of a write whose next seq was
# read before another writer's messages committed conflicts on it.
SEQ_INDEX = "conversation_session_seq"

STORED_ROLES = frozenset({Role.USER, Role.ASSISTANT, Role.TOOL})

# The same columns from an UPDATE ... RETURNING, which cannot alias its table.
_RETURNING = COLUMNS.replace("c.", "conversation.") + ALL_TOKENS.replace(
    "c.id", "conversation.id"
).join((", ", ""))


class ConversationRepo(ConversationReads):
    """Conversation rows: the writes here, the reads (and the rows kept in memory) in
    ``ConversationReads``."""

    async def append(
        self,
        session_id: str,
        user_id: str,
        messages: Sequence[NewMessage],
        *,
        tenant_id: str = DEFAULT_TENANT,
        also: Sequence[JoinedWrite] = (),
    ) -> list[StoredMessage]:
        """Store ``messages`` at the end of the session, in one transaction (one
        statement where writes go in WITH, up to ``INSERT_CHUNK`` messages).

        Seqs continue from the session's current last one; each message's ``tokens`` are
        stored with it; the session's ``updated_at`` and ``message_count`` follow (a trigger
        of the schema does that in the same statement). Raises SessionNotFound when the
        session does not exist or belongs to another user (of the tenant, or another
        tenant), ValueError for a system message. ``also``'s writes run in the same
        transaction, in their order.
        """
        stored, _ = await self._append(session_id, (tenant_id, user_id), messages, None, also)
        return stored

    async def append_with_usage(
        self,
        session_id: str,
        user_id: str,
        messages: Sequence[NewMessage],
        usage: UsageTotals,
        *,
        tenant_id: str = DEFAULT_TENANT,
        also: Sequence[JoinedWrite] = (),
        answer: AnswerRecord | None = None,
    ) -> tuple[list[StoredMessage], UsageTotals]:
        """``append``, and add a turn's usage to the
        session's in the same transaction; returns the messages and the session's totals.
        ``answer``: the record of the last message, an answer (answer_records)."""
        owner = (tenant_id, user_id)
        stored, totals = await self._append(session_id, owner, messages, usage, also, answer)
        assert totals is not None
        return stored, totals

    async def _append(
        self,
        session_id: str,
        owner: tuple[str, str],
        messages: Sequence[NewMessage],
        usage: UsageTotals | None,
        also: Sequence[JoinedWrite],
        answer: AnswerRecord | None = None,
    ) -> tuple[list[StoredMessage], UsageTotals | None]:
        for new in messages:
            if new.message.role not in STORED_ROLES:
                raise ValueError(
                    f"a {new.message.role.value} message cannot be stored in a conversation "
                    "(only user, assistant and tool messages)"
                )
        if not messages and usage is None and not also:
            return [], None
        if self._db.writes_in_with and len(messages) <= INSERT_CHUNK:
            try:
                return await self._append_in_one(session_id, owner, messages, usage, also, answer)
            except KeyConflict:
                pass  # another writer of the session came between: in order, as below
        totals = None
        async with self._db.transaction() as conn:
            # The next seq is read under the session's row lock (where writers run at once),
            # taken by the statement that moves the session's version on (the usage's,
            # when there is usage to add).
            if usage is not None:
                totals, version = await add_usage(
                    conn, session_id, usage, next_version=self._versioned
                )
            else:
                version = await self._db.next_session_version(conn, session_id)
            stored = await _insert(conn, session_id, owner, messages, self._db.writes_in_with)
            if answer is not None and stored:
                await _insert_answer_record(conn, stored[-1].id, answer)
            for joined in also:
                await conn.execute(joined.sql, joined.params)
        self._appended(owner[0], session_id, stored, version)
        return stored, totals

    async def _append_in_one(
        self,
        session_id: str,
        owner: tuple[str, str],
        messages: Sequence[NewMessage],
        usage: UsageTotals | None,
        also: Sequence[JoinedWrite],
        answer: AnswerRecord | None,
    ) -> tuple[list[StoredMessage], UsageTotals | None]:
        """``_append`` as one statement that commits by itself: one round trip, where
        BEGIN, the version, the messages, ``also``, the answer's record and COMMIT took
        six."""
        now = time.time()
        sql, params = _one_statement(session_id, owner, messages, usage, also, now, answer)
        rows = await self._db.fetch_alone(sql, params, conflict_on=SEQ_INDEX)
        if not rows:  # no session of this user (of the tenant): nothing was written
            raise SessionNotFound(session_id)
        first = rows[0]
        stored = _stored_new(session_id, owner[1], messages, rows, now) if messages else []
        totals = totals_from_row(first) if usage is not None else None
        self._appended(owner[0], session_id, stored, int(first["version"]))
        return stored, totals

    def _appended(
        self, tenant_id: str, session_id: str, stored: list[StoredMessage], version: int | None
    ) -> None:
        """A write of the session's messages committed, moving its version on to
        ``version``: the kept rows, and what else is kept at the version, move on."""
        self._tails.appended((tenant_id, session_id), stored, version)
        if version is not None:
            for moved in self._db.messages_appended:
                moved(session_id, version)

    async def save_tokens(
        self,
        rows: Iterable[tuple[int, str, int]],
        session_id: str,
        *,
        tenant_id: str = DEFAULT_TENANT,
    ) -> None:
        """Store (message_id, tokenizer, tokens) counts of messages of ``session_id``,
        whose cached rows get them too; a count already stored is kept. The count of a
        message deleted since it was read (with its session) is left out, not an error:
        counts only spare tokenizing again."""
        batch = list(rows)
        if not batch:
            return
        async with self._db.transaction() as conn:
            await conn.executemany(
                "INSERT INTO message_tokens (message_id, tokenizer, tokens)"
                " SELECT id, ?, ? FROM conversation WHERE id = ? ON CONFLICT DO NOTHING",
                [(name, n, mid) for mid, name, n in batch],
            )
        self._tails.counts_saved((tenant_id, session_id), batch)

    async def set_collected(
        self, message_id: int, collected: bool, *, tenant_id: str = DEFAULT_TENANT
    ) -> StoredMessage | None:
        """Set or clear ``is_collected`` of the tenant's message; the updated message, or
        None if there is none."""
        async with self._db.transaction() as conn:
            rows = await conn.execute_fetchall(
                "UPDATE conversation SET is_collected = ?, updated_at = ?"
                f" WHERE id = ? AND tenant_id = ? RETURNING {_RETURNING}",
                (int(collected), time.time(), message_id, tenant_id),
            )
            for row in rows:  # a changed row: other processes' kept rows must go too
                await self._db.next_session_version(conn, row["session_id"])
        for row in rows:
            updated = with_all_tokens(row)
            self._tails.drop((tenant_id, updated.session_id))
            return updated
        return None


# How messages are written: the statements of ``_append``.


def _tool_calls_json(calls: Sequence[ToolCall]) -> str | None:
    if not calls:
        return None
    return json.dumps(
        [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls],
        ensure_ascii=False,
    )


async def _insert(
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
        stored += _stored_new(session_id, owner[1], chunk, rows, now)
    token_rows = [(item.id, name, count) for item in stored for name, count in item.tokens.items()]
    if token_rows and not counts_with:
        await conn.executemany(
            "INSERT INTO message_tokens (message_id, tokenizer, tokens) VALUES (?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            token_rows,
        )
    return stored


def _stored_new(
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


def _one_statement(
    session_id: str,
    owner: tuple[str, str],
    messages: Sequence[NewMessage],
    usage: UsageTotals | None,
    also: Sequence[JoinedWrite],
    now: float,
    answer: AnswerRecord | None = None,
) -> tuple[str, list[object]]:
    """``_append``'s transaction as one WITH statement (PostgreSQL): ``written`` moves the
    session's version on (and adds ``usage``) and holds its row, which must be the
    owner's; the messages with their counts, ``also``'s writes and the ``answer``'s record (kept
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
    for joined in also:
        parts.append(joined.in_with)
        params += joined.params
    if answer is not None and messages:
        recorded, recorded_params = _answer_in_with("added", answer)
        parts.append(f"recorded AS ({recorded})")
        params += recorded_params
    return f"WITH {', '.join(parts)} SELECT {selected}{tail}", params


# An answer's record (store/answer_records.py), written with the answer's message.


async def _insert_answer_record(conn: Connection, message_id: int, record: AnswerRecord) -> None:
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

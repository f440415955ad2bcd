"""The conversation table's writes: every user, assistant and tool message of a session,
stored in order with its token counts (``ConversationRepo``, which answers the reads of
store/conversation_reads.py too and tells its kept rows of every write once it committed).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from contextd.core.errors import SessionNotFound
from contextd.core.identity import DEFAULT_TENANT
from contextd.core.messages import Role
from contextd.store.conversation_reads import (
    ALL_TOKENS,
    COLUMNS,
    ConversationReads,
    with_all_tokens,
)
from contextd.store.engine.database import JoinedWrite, KeyConflict
from contextd.store.message_writes import (
    INSERT_CHUNK,
    SEQ_INDEX,
    insert,
    insert_answer_record,
    one_statement,
    stored_new,
)
from contextd.store.models import AnswerRecord, NewMessage, StoredMessage, UsageTotals
from contextd.store.sessions import add_usage, totals_from_row

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
        also: JoinedWrite | None = None,
    ) -> list[StoredMessage]:
        """Store ``messages`` at the end of the session, in one transaction (one
        statement where writes go in WITH, up to ``INSERT_CHUNK`` messages).

        Seqs continue from the session's current last one; each message's ``tokens`` are
        stored with it; the session's ``updated_at`` and ``message_count`` follow (a trigger
        of the schema does that in the same statement). Raises SessionNotFound when the
        session does not exist or belongs to another user (of the tenant, or another
        tenant), ValueError for a system message. ``also`` runs in the same transaction.
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
        also: JoinedWrite | None = None,
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
        also: JoinedWrite | None,
        answer: AnswerRecord | None = None,
    ) -> tuple[list[StoredMessage], UsageTotals | None]:
        for new in messages:
            if new.message.role not in STORED_ROLES:
                raise ValueError(
                    f"a {new.message.role.value} message cannot be stored in a conversation "
                    "(only user, assistant and tool messages)"
                )
        if not messages and usage is None and also is None:
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
            stored = await insert(conn, session_id, owner, messages, self._db.writes_in_with)
            if answer is not None and stored:
                await insert_answer_record(conn, stored[-1].id, answer)
            if also is not None:
                await conn.execute(also.sql, also.params)
        self._appended(owner[0], session_id, stored, version)
        return stored, totals

    async def _append_in_one(
        self,
        session_id: str,
        owner: tuple[str, str],
        messages: Sequence[NewMessage],
        usage: UsageTotals | None,
        also: JoinedWrite | None,
        answer: AnswerRecord | None,
    ) -> tuple[list[StoredMessage], UsageTotals | None]:
        """``_append`` as one statement that commits by itself: one round trip, where
        BEGIN, the version, the messages, ``also``, the answer's record and COMMIT took
        six."""
        now = time.time()
        sql, params = one_statement(session_id, owner, messages, usage, also, now, answer)
        rows = await self._db.fetch_alone(sql, params, conflict_on=SEQ_INDEX)
        if not rows:  # no session of this user (of the tenant): nothing was written
            raise SessionNotFound(session_id)
        first = rows[0]
        stored = stored_new(session_id, owner[1], messages, rows, now) if messages else []
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

"""The conversation table: every user, assistant and tool message of a session, in order.

Each message's token counts live in ``message_tokens`` (one row per tokenizer), written with
the message, so the rolling window (:meth:`ConversationRepo.tail`) reads counts instead of
tokenizing, and costs in the number of messages it returns, not in the session's length.

Every chat turn reads its session's newest messages two or three times (its number, the
window, the work after the turn). :class:`ConversationRepo` keeps them in memory
(store/tail_cache.py, which has the rule that keeps them current) and tells that cache of
every write once it committed. A session created through SessionRepo starts cached, with
no rows. Where another server may write (PostgreSQL), kept rows answer only a read that
names the session's version its call read (``tail``'s ``version``, from a
store/session_snapshot.py read); other reads go to the database.

Every read names the session's tenant (the default one unless given): stored rows and
kept ones are found only within it, kept rows being keyed by (tenant, session).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from contextd.core.errors import SessionNotFound
from contextd.core.identity import DEFAULT_TENANT
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.store import answer_records
from contextd.store.engine.database import Database, JoinedWrite, KeyConflict
from contextd.store.message_writes import (
    INSERT_CHUNK,
    SEQ_INDEX,
    insert,
    one_statement,
    stored_new,
)
from contextd.store.models import (
    NO_TOKENS,
    AnswerRecord,
    NewMessage,
    StoredMessage,
    parts_from_json,
    token_counts,
)
from contextd.store.paging import decode_token, encode_token, page_limit
from contextd.store.sessions import UsageTotals, add_usage, totals_from_row
from contextd.store.tail_cache import TailCache

STORED_ROLES = frozenset({Role.USER, Role.ASSISTANT, Role.TOOL})

# A message's columns, in the order ``_stored`` unpacks them: every read selects them
# through ``_COLUMNS``, then its token counts as ``tokens``.
_MESSAGE_COLUMNS = (
    "id", "session_id", "user_id", "seq", "role", "content", "tool_calls", "tool_call_id",
    "turn_index", "is_collected", "status", "created_at", "parts",
)  # fmt: skip
_COLUMNS = ", ".join(f"c.{name}" for name in _MESSAGE_COLUMNS)
_WIDTH = len(_MESSAGE_COLUMNS)
# All token counts of the row as one JSON object ({"tokenizer": count}), NULL when none.
_ALL_TOKENS = (
    "(SELECT json_group_object(t.tokenizer, t.tokens) FROM message_tokens t"
    " WHERE t.message_id = c.id) AS tokens"
)

# The rolling window, newest first: conversation_session_seq searched backwards from the
# session's last seq, stopping after ``limit`` rows; each row joined to its one count by the
# message_tokens primary key. Parameters: tokenizer, session_id, tenant_id, limit.
TAIL_SQL = (
    f"SELECT {_COLUMNS}, t.tokens FROM conversation c"
    " LEFT JOIN message_tokens t ON t.message_id = c.id AND t.tokenizer = ?"
    " WHERE c.session_id = ? AND c.tenant_id = ? ORDER BY c.seq DESC LIMIT ?"
)
# The same columns from an UPDATE ... RETURNING, which cannot alias its table.
_RETURNING = _COLUMNS.replace("c.", "conversation.") + _ALL_TOKENS.replace(
    "c.id", "conversation.id"
).join((", ", ""))


def _tool_calls(text: str | None) -> tuple[ToolCall, ...]:
    if not text:
        return ()
    return tuple(ToolCall(c["id"], c["name"], c.get("arguments", "")) for c in json.loads(text))


# Role by stored value: a dict lookup is much cheaper than Role(value), and a tail read
# makes up to TAIL_CACHE_ROWS (store/tail_cache.py) messages.
_ROLES = {role.value: role for role in Role}


def _stored(row: Any, tokens: Mapping[str, int]) -> StoredMessage:
    # Unpacked in the order of _MESSAGE_COLUMNS, not looked up by name: a tail read builds
    # up to TAIL_CACHE_ROWS rows, and 13 lookups by name in an sqlite3.Row cost several
    # times what unpacking does.
    (mid, session_id, user_id, seq, role, content, calls, call_id, turn, collected, status, at,
     parts) = row[:_WIDTH]  # fmt: skip
    message = ChatMessage(
        _ROLES[role],
        content,
        _tool_calls(calls),
        call_id,
        str(mid),
        parts_from_json(parts) if parts else (),
    )
    # Positional arguments, in the order of the fields: keyword arguments would make
    # building a row noticeably slower, for every row a tail read makes.
    return StoredMessage(
        mid, session_id, user_id, seq, message, turn, bool(collected), status, at, tokens
    )


def _with_one_count(row: Any, tokenizer: str) -> StoredMessage:
    count = row["tokens"]
    return _stored(row, NO_TOKENS if count is None else MappingProxyType({tokenizer: count}))


def _with_one_count_listed(row: Sequence[Any], tokenizer: str) -> StoredMessage:
    """``_with_one_count`` of a row given as a list (its count last)."""
    count = row[_WIDTH]
    return _stored(row, NO_TOKENS if count is None else MappingProxyType({tokenizer: count}))


def _with_all_tokens(row: Any) -> StoredMessage:
    tokens = row["tokens"]
    return _stored(row, token_counts(json.loads(tokens)) if tokens else NO_TOKENS)


class ConversationRepo:
    """Conversation rows, the newest of each session kept in memory (see the module
    docstring)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._tails = TailCache()
        # Kept rows answer only reads checked against the session's version.
        self._versioned = db.shared_between_processes
        db.session_created.append(lambda tenant_id, sid: self._tails.created((tenant_id, sid)))
        db.session_deleted.append(lambda tenant_id, sid: self._tails.drop((tenant_id, sid)))

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
                await answer_records.insert(conn, stored[-1].id, answer)
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

    async def get(
        self, message_id: int, *, tenant_id: str = DEFAULT_TENANT
    ) -> StoredMessage | None:
        """The tenant's message with all its stored token counts (None for another
        tenant's: the caller checks the user)."""
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_COLUMNS}, {_ALL_TOKENS} FROM conversation c"
            " WHERE c.id = ? AND c.tenant_id = ?",
            (message_id, tenant_id),
        )
        for row in rows:
            return _with_all_tokens(row)
        return None

    async def list_messages(
        self,
        session_id: str,
        page_size: int = 0,
        page_token: str = "",
        *,
        tenant_id: str = DEFAULT_TENANT,
    ) -> tuple[list[StoredMessage], str]:
        """A page of the (tenant's) session's messages, oldest first, with all their token
        counts."""
        limit = page_limit(page_size)
        after = -1
        if page_token:
            (last_seq,) = decode_token(page_token, "messages", session_id, (int,))
            assert isinstance(last_seq, int)
            after = last_seq
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_COLUMNS}, {_ALL_TOKENS} FROM conversation c"
            " WHERE c.session_id = ? AND c.tenant_id = ? AND c.seq > ? ORDER BY c.seq LIMIT ?",
            (session_id, tenant_id, after, limit + 1),
        )
        items = [_with_all_tokens(row) for row in rows]
        more = len(items) > limit
        del items[limit:]
        answers = await answer_records.of_messages(
            self._db, (m.id for m in items if m.message.role is Role.ASSISTANT)
        )
        if answers:
            items = [replace(m, answer=answers.get(m.id)) for m in items]
        if not more:
            return items, ""
        return items, encode_token("messages", session_id, [items[-1].seq])

    async def first(
        self, session_id: str, *, tenant_id: str = DEFAULT_TENANT, version: int | None = None
    ) -> StoredMessage | None:
        """The session's first message: kept (from the cached rows when they are all of
        the session's, with the counts they have), else read with all its counts and
        kept. ``version``: as ``tail``'s."""
        key = (tenant_id, session_id)
        kept = not self._versioned or version is not None
        if kept:
            self._tails.check(key, version)
            every = self._tails.all_rows(key)
            first = (every[0] if every else None) if every is not None else self._tails.first(key)
            if first is not None or every is not None:
                return first
        page, _ = await self.list_messages(session_id, 1, tenant_id=tenant_id)
        if page and kept:
            self._tails.first_read(key, page[0], version)
        return page[0] if page else None

    async def last_turn(self, session_id: str, *, tenant_id: str = DEFAULT_TENANT) -> int:
        """The turn of the session's newest message; 0 for a session without messages."""
        rows = await self._db.reader.execute_fetchall(
            "SELECT turn_index FROM conversation WHERE session_id = ? AND tenant_id = ?"
            " ORDER BY seq DESC LIMIT 1",
            (session_id, tenant_id),
        )
        return int(rows[0]["turn_index"]) if rows else 0

    async def tail(
        self,
        session_id: str,
        limit: int,
        tokenizer: str,
        *,
        tenant_id: str = DEFAULT_TENANT,
        version: int | None = None,
    ) -> list[StoredMessage]:
        """The newest ``limit`` messages in chronological order (one indexed query, or
        none when the session's newest messages are cached). ``version``: the session's,
        as the caller's call read it (store/session_snapshot.py); where other processes
        write (PostgreSQL), only a read that names it is answered from memory.

        Each has ``tokens[tokenizer]`` when that count is stored, and no other count. The
        rows are shared with later calls (they are frozen).
        """
        if limit <= 0:
            return []
        key = (tenant_id, session_id)
        kept = not self._versioned or version is not None
        if kept:
            self._tails.check(key, version)
            cached = self._tails.newest(key, tokenizer, limit)
            if cached is not None:
                return list(cached[-limit:])
        rows = await self._db.reader.execute_fetchall(
            TAIL_SQL, (tokenizer, session_id, tenant_id, limit)
        )
        out = [_with_one_count(row, tokenizer) for row in rows]
        out.reverse()
        if kept:
            self._tails.read(key, tokenizer, out, limit, version)
        return out

    async def current_version(
        self, session_id: str, *, tenant_id: str = DEFAULT_TENANT
    ) -> int | None:
        """The session's version as the database has it now, for reads that name it
        (``tail``); None where no other process writes (no statement: SQLite) or the
        session is gone."""
        if not self._versioned:
            return None
        rows = await self._db.reader.execute_fetchall(
            "SELECT version FROM sessions WHERE id = ? AND tenant_id = ?", (session_id, tenant_id)
        )
        return int(rows[0]["version"]) if rows else None

    def tail_version(self, session_id: str, *, tenant_id: str = DEFAULT_TENANT) -> int | None:
        """The session version the kept rows are at (None: none kept)."""
        return self._tails.version((tenant_id, session_id))

    def read_at(
        self,
        session_id: str,
        tenant_id: str,
        version: int,
        tokenizer: str,
        window: Sequence[Sequence[Any]] | None,
        limit: int,
    ) -> None:
        """The session was read at ``version`` by a call, with (unless None) its newest
        ``limit`` rows, newest first, each as ``TAIL_SQL``'s columns in a list."""
        key = (tenant_id, session_id)
        self._tails.check(key, version)
        if window is not None:
            out = [_with_one_count_listed(row, tokenizer) for row in reversed(window)]
            self._tails.read(key, tokenizer, out, limit, version)

    async def turn_messages(
        self,
        session_id: str,
        turn_index: int,
        tokenizer: str,
        at_most: int = 1024,
        *,
        tenant_id: str = DEFAULT_TENANT,
        version: int | None = None,
    ) -> list[StoredMessage]:
        """The messages of turn ``turn_index`` among the session's newest ``at_most``, oldest
        first (as ``tail`` reads them), read back from the newest only as far as needed.
        ``version``: as ``tail``'s."""
        limit = min(16, at_most)
        while True:
            rows = await self.tail(
                session_id, limit, tokenizer, tenant_id=tenant_id, version=version
            )
            if len(rows) < limit or rows[0].turn_index < turn_index or limit >= at_most:
                break
            limit = min(limit * 4, at_most)
        return [r for r in rows if r.turn_index == turn_index]

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
            updated = _with_all_tokens(row)
            self._tails.drop((tenant_id, updated.session_id))
            return updated
        return None

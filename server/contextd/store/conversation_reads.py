"""The conversation's read side: a session's messages as stored rows, its newest kept in
memory, and the reads that answer from them (``ConversationReads``; the writes are
store/conversation.py's ``ConversationRepo``, which extends it and tells the kept rows of
every write once it committed).

Each message's token counts live in ``message_tokens`` (one row per tokenizer), written with
the message, so the rolling window (:meth:`ConversationReads.tail`) reads counts instead of
tokenizing, and costs in the number of messages it returns, not in the session's length.
Every chat turn reads its session's newest messages two or three times (its number, the
window, the work after the turn): ``TailCache`` keeps them as ``tail`` reads them. A
session created through SessionRepo starts kept, with no rows. Where another server may
write (PostgreSQL), kept rows answer only a read that names the session's version its
call read (``tail``'s ``version``, from a store/sessions.py read); other reads go
to the database. Every read names the session's tenant (the default one unless given):
stored rows and kept ones are found only within it, kept rows being keyed by (tenant,
session).

The kept rows' coherence rule: a cache changes only after its transaction commits, in the
same step (no ``await`` that suspends between the end of ``async with db.transaction()`` and
the call here), and a write that raised leaves it alone, since the rollback left the
database as it was (store/engine/sqlite.py says why this holds). With this process the
database's only writer and every write to a conversation made by ConversationRepo, which
tells this cache of each one once it committed (new messages and counts are added to the
kept rows, a changed row or a deleted session drops them), the kept rows are what a query
would return.

Rows are kept per session, keyed by (tenant id, session id), and tokenizer. A session
created by this process starts kept with no rows and every count (the ``None`` tokenizer):
all its rows are written here, and any tokenizer's rows are made from those.

Where other processes write the database too (PostgreSQL's replicas, the workers of one
server on SQLite), the rule above does not see their writes, so kept rows carry the
session's version (``sessions.version``, moved on by every write of its messages in that
write's transaction) and answer only a read that names the version its call read from the
database (``check``); a version that moved on drops them. Rows are kept under a version only
when read at it or after it (the same statement, or later), never before: kept rows newer
than their version are dropped at the next check, older ones could not be told apart. A
write of this process moves the version of the rows it extends only when they were at the
version just before it (``appended``).

Beside the rows, a session's first message is kept once read (``first_read``): the work
after every turn reads it, and it is seldom among the newest rows. It stays with the
session's rows: appends leave a session's first message as it was, and whatever else
changes a row (or moves the version on in another process) drops both.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from contextd.core.identity import DEFAULT_TENANT
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.store import answer_records
from contextd.store.engine.database import Database
from contextd.store.models import NO_TOKENS, StoredMessage, parts_from_json, token_counts
from contextd.store.paging import decode_token, encode_token, page_limit

# A message's columns, in the order ``_stored`` unpacks them: every read selects them
# through ``COLUMNS``, then its token counts as ``tokens``.
_MESSAGE_COLUMNS = (
    "id", "session_id", "user_id", "seq", "role", "content", "tool_calls", "tool_call_id",
    "turn_index", "is_collected", "status", "created_at", "parts",
)  # fmt: skip
COLUMNS = ", ".join(f"c.{name}" for name in _MESSAGE_COLUMNS)
_WIDTH = len(_MESSAGE_COLUMNS)
# All token counts of the row as one JSON object ({"tokenizer": count}), NULL when none.
ALL_TOKENS = (
    "(SELECT json_group_object(t.tokenizer, t.tokens) FROM message_tokens t"
    " WHERE t.message_id = c.id) AS tokens"
)

# The rolling window, newest first: conversation_session_seq searched backwards from the
# session's last seq, stopping after ``limit`` rows; each row joined to its one count by the
# message_tokens primary key. Parameters: tokenizer, session_id, tenant_id, limit.
TAIL_SQL = (
    f"SELECT {COLUMNS}, t.tokens FROM conversation c"
    " LEFT JOIN message_tokens t ON t.message_id = c.id AND t.tokenizer = ?"
    " WHERE c.session_id = ? AND c.tenant_id = ? ORDER BY c.seq DESC LIMIT ?"
)


def _tool_calls(text: str | None) -> tuple[ToolCall, ...]:
    if not text:
        return ()
    return tuple(ToolCall(c["id"], c["name"], c.get("arguments", "")) for c in json.loads(text))


# Role by stored value: a dict lookup is much cheaper than Role(value), and a tail read
# makes up to TAIL_CACHE_ROWS messages.
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


def with_all_tokens(row: Any) -> StoredMessage:
    tokens = row["tokens"]
    return _stored(row, token_counts(json.loads(tokens)) if tokens else NO_TOKENS)


# The cache's bounds: sessions kept, newest rows kept per session and tokenizer, characters
# of message content kept in all (the least recently used sessions go first).
TAIL_CACHE_SESSIONS = 512
TAIL_CACHE_ROWS = 256
TAIL_CACHE_CHARS = 32_000_000
# Versions kept (of sessions whose rows may be gone) before the ones without rows go.
_VERSIONS_KEPT = 2 * TAIL_CACHE_SESSIONS


def _chars(rows: Iterable[StoredMessage]) -> int:
    return sum(len(r.message.content) for r in rows)


def _counted(stored: StoredMessage, tokenizer: str | None) -> StoredMessage:
    """``stored`` as ``tail`` reads it: with ``tokenizer``'s count only (None: every count)."""
    if tokenizer is None:
        return stored
    count = stored.tokens.get(tokenizer)
    if len(stored.tokens) == (count is not None):  # no other count: already as read
        return stored
    s = stored
    tokens = NO_TOKENS if count is None else MappingProxyType({tokenizer: count})
    return StoredMessage(
        s.id, s.session_id, s.user_id, s.seq, s.message, s.turn_index, s.is_collected, s.status,
        s.created_at, tokens,
    )  # fmt: skip


def _with_counts(
    row: StoredMessage, counts: Mapping[int, Sequence[tuple[str, int]]], tokenizer: str | None
) -> StoredMessage:
    """``row`` with the new ``counts`` of its message that a ``tokenizer`` row shows (None:
    all); as INSERT OR IGNORE, a count it has already is kept."""
    new = counts.get(row.id)
    if new is None:
        return row
    tokens = dict(row.tokens)
    for name, n in new:
        if tokenizer is None or tokenizer == name:
            tokens.setdefault(name, n)
    if len(tokens) == len(row.tokens):
        return row
    return replace(row, tokens=token_counts(tokens))


@dataclass(frozen=True, slots=True)
class _CachedTail:
    """A session's newest rows (oldest first), as ``tail`` reads them with one tokenizer,
    or (tokenizer None) with every count stored for them; ``whole``: they are all of the
    session's messages; ``chars``: their content's length."""

    rows: tuple[StoredMessage, ...]
    whole: bool
    chars: int

    @classmethod
    def newest_of(cls, rows: Sequence[StoredMessage], whole: bool) -> _CachedTail:
        """The newest TAIL_CACHE_ROWS of ``rows`` (oldest first; ``whole``: all there are)."""
        kept = tuple(rows[-TAIL_CACHE_ROWS:])
        return cls(kept, whole and len(kept) == len(rows), _chars(kept))

    def extended(self, added: Sequence[StoredMessage], added_chars: int) -> _CachedTail:
        """These rows followed by ``added``, trimmed to the newest TAIL_CACHE_ROWS."""
        rows = self.rows + tuple(added)
        extra = len(rows) - TAIL_CACHE_ROWS
        if extra <= 0:
            return _CachedTail(rows, self.whole, self.chars + added_chars)
        chars = self.chars + added_chars - _chars(rows[:extra])
        return _CachedTail(rows[extra:], False, chars)


# A session's cached rows by tokenizer (None: with every count, see the module docstring).
# Never changed once cached: a change caches a new mapping.
_SessionTails = Mapping[str | None, _CachedTail]
# A session's key: (tenant id, session id). A read names its tenant, and finds only rows
# kept for that tenant.
SessionKey = tuple[str, str]


class TailCache:
    """The kept rows; ``_put`` and ``drop`` are the only ways in and out. Methods that
    take a ``version`` take None where the database has no other writer (SQLite)."""

    def __init__(self) -> None:
        # (tenant id, session id) -> tokenizer -> its newest rows; least recently used
        # session first.
        self._tails: OrderedDict[SessionKey, _SessionTails] = OrderedDict()
        self._chars = 0
        # The session version the kept rows are at (see the module docstring).
        self._versions: dict[SessionKey, int] = {}
        # Sessions' first messages, with every count, for sessions whose rows are kept.
        self._firsts: dict[SessionKey, StoredMessage] = {}

    def _put(self, key: SessionKey, tails: _SessionTails) -> None:
        """Keep ``tails`` as the session's rows (in place of any), then drop the least
        recently used sessions while the cache is over its bounds."""
        self._forget_rows(key)
        self._tails[key] = tails
        self._chars += sum(t.chars for t in tails.values())
        while len(self._tails) > TAIL_CACHE_SESSIONS or self._chars > TAIL_CACHE_CHARS:
            self.drop(next(iter(self._tails)))

    def _forget_rows(self, key: SessionKey) -> None:
        tails = self._tails.pop(key, None)
        if tails is not None:
            self._chars -= sum(t.chars for t in tails.values())

    def drop(self, key: SessionKey) -> None:
        """Forget the session's rows (it was deleted, or one of its rows changed), if any."""
        self._forget_rows(key)
        self._versions.pop(key, None)
        self._firsts.pop(key, None)

    def version(self, key: SessionKey) -> int | None:
        """The version the session's kept rows are at, None when none are kept."""
        return self._versions.get(key) if key in self._tails else None

    def check(self, key: SessionKey, version: int | None) -> None:
        """A call read the session at ``version``: rows kept at another one go, and rows
        read from now on are kept at this one."""
        if version is None or self._versions.get(key) == version:
            return
        self.drop(key)
        if len(self._versions) >= _VERSIONS_KEPT:
            self._versions = {k: v for k, v in self._versions.items() if k in self._tails}
        self._versions[key] = version

    def created(self, key: SessionKey) -> None:
        """The session's creation committed: it has no messages yet (version 0)."""
        self._put(key, {None: _CachedTail((), True, 0)})
        self._versions[key] = 0

    def newest(
        self, key: SessionKey, tokenizer: str, limit: int
    ) -> tuple[StoredMessage, ...] | None:
        """The session's kept rows when they answer a read of its newest ``limit`` (all
        its rows, or at least ``limit`` of them), else None: the database has to."""
        tails = self._tails.get(key)
        if tails is None:
            return None
        tail = tails.get(tokenizer)
        every = tails.get(None)
        if tail is None and every is not None:
            rows = tuple(_counted(r, tokenizer) for r in every.rows)
            tail = _CachedTail(rows, every.whole, every.chars)
            self._put(key, {**tails, tokenizer: tail})
        if tail is None or (len(tail.rows) < limit and not tail.whole):
            return None
        self._tails.move_to_end(key)
        return tail.rows

    def all_rows(self, key: SessionKey) -> tuple[StoredMessage, ...] | None:
        """Every message of the session, with the counts they were kept with, when the
        kept rows are all of them; else None."""
        for tail in self._tails.get(key, {}).values():
            if tail.whole:
                return tail.rows
        return None

    def first(self, key: SessionKey) -> StoredMessage | None:
        """The session's first message as read and kept by ``first_read`` (None: not
        kept; ``all_rows`` may still have it)."""
        return self._firsts.get(key) if key in self._tails else None

    def first_read(self, key: SessionKey, first: StoredMessage, version: int | None) -> None:
        """``first`` (with every count) was just read as the session's first message, by a
        call that read the session at ``version``: kept with the session's rows, if any,
        unless the version moved on since."""
        if key in self._tails and (version is None or self._versions.get(key) == version):
            self._firsts[key] = first

    def read(
        self,
        key: SessionKey,
        tokenizer: str,
        rows: Sequence[StoredMessage],
        limit: int,
        version: int | None = None,
    ) -> None:
        """``rows`` (oldest first) were just read as the session's newest ``limit``, by a
        call that read the session at ``version``: kept unless the version moved on since
        (the rows may be from before a write of this process)."""
        if version is not None and self._versions.get(key) != version:
            return
        tails = self._tails.get(key, {})
        kept = tails.get(tokenizer)
        # A session with no messages may not exist: nothing is kept for it. Kept rows are
        # current: they are replaced only by more of them (a window wider than the cache
        # keeps what it holds).
        if rows and (kept is None or len(kept.rows) < min(len(rows), TAIL_CACHE_ROWS)):
            tail = _CachedTail.newest_of(rows, len(rows) < limit)
            self._put(key, {**tails, tokenizer: tail})

    def appended(
        self, key: SessionKey, stored: Sequence[StoredMessage], version: int | None = None
    ) -> None:
        """``stored`` (with all their counts) were committed at the end of the session, by
        a write that moved its version on to ``version``."""
        cached = self._tails.get(key)
        if cached is None:
            return
        if version is not None:
            if self._versions.get(key) != version - 1:
                self.drop(key)
                return
            self._versions[key] = version
        added = _chars(stored)
        self._put(
            key,
            {
                tokenizer: tail.extended([_counted(m, tokenizer) for m in stored], added)
                for tokenizer, tail in cached.items()
            },
        )

    def counts_saved(self, key: SessionKey, batch: Iterable[tuple[int, str, int]]) -> None:
        """(message_id, tokenizer, tokens) counts of the session's messages were committed
        (a count already stored kept)."""
        tails = self._tails.get(key)
        if tails is None:
            return
        counts: dict[int, list[tuple[str, int]]] = {}
        for mid, name, n in batch:
            counts.setdefault(mid, []).append((name, n))
        first = self._firsts.get(key)
        if first is not None:
            self._firsts[key] = _with_counts(first, counts, None)
        self._put(
            key,
            {
                tokenizer: replace(
                    tail, rows=tuple(_with_counts(row, counts, tokenizer) for row in tail.rows)
                )
                for tokenizer, tail in tails.items()
            },
        )


class ConversationReads:
    """Reads of conversation rows, the newest of each session kept in memory (see the
    module docstring)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._tails = TailCache()
        # Kept rows answer only reads checked against the session's version.
        self._versioned = db.shared_between_processes
        db.session_created.append(lambda tenant_id, sid: self._tails.created((tenant_id, sid)))
        db.session_deleted.append(lambda tenant_id, sid: self._tails.drop((tenant_id, sid)))

    async def get(
        self, message_id: int, *, tenant_id: str = DEFAULT_TENANT
    ) -> StoredMessage | None:
        """The tenant's message with all its stored token counts (None for another
        tenant's: the caller checks the user)."""
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {COLUMNS}, {ALL_TOKENS} FROM conversation c"
            " WHERE c.id = ? AND c.tenant_id = ?",
            (message_id, tenant_id),
        )
        for row in rows:
            return with_all_tokens(row)
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
            f"SELECT {COLUMNS}, {ALL_TOKENS} FROM conversation c"
            " WHERE c.session_id = ? AND c.tenant_id = ? AND c.seq > ? ORDER BY c.seq LIMIT ?",
            (session_id, tenant_id, after, limit + 1),
        )
        items = [with_all_tokens(row) for row in rows]
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
        as the caller's call read it (store/sessions.py); where other processes
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

"""Partial answers: what a running chat turn has streamed so far, one row per session.

A turn's row is opened in the transaction that stores the turn's input, its text replaced
while a model step streams (``save``), emptied when a step's text is stored as a message
the turn goes on after, and deleted in the transaction that stores the turn's answer. The
conversation never holds a half answer: history reads do not see these rows.

Each row names its ``owner``, a token of the process that runs the turn. With one process
per database (SQLite: store/engine/data_lock.py), every row left at start is a turn the server's
end cut off (``left_behind``). Where processes share the database (PostgreSQL), the row is
also the session's lease: a turn claims it before it numbers itself (``claim``), its
owner renews ``updated_at`` every quarter of the lease (``renew``), and a row no one renewed for
``lease_seconds`` (the server's ``--turn-lease-seconds``, far above the renewals' one
second, so that a busy process or a slow write does not lose its turn) is a turn of a
process that died, for the next turn (or the next start) to close.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

from contextd.core.errors import SessionNotFound
from contextd.store.engine.database import Database, JoinedWrite, Row
from contextd.store.models import Session, UsageTotals
from contextd.store.sessions import columns as session_columns
from contextd.store.sessions import session_from_row, usage_totals

_COLUMNS = (
    "p.tenant_id, p.session_id, s.user_id, p.turn_index, p.step, p.text, p.tokenizer,"
    " p.prompt_tokens, p.completion_tokens, p.prompt_tokens_estimate, p.cache_read_tokens,"
    " p.cache_write_tokens, p.usage_estimated, p.started_at, p.updated_at, p.owner"
)


@dataclass(frozen=True, slots=True)
class PartialAnswer:
    """A turn's row: the text its model step ``step`` streamed, and its usage so far."""

    tenant_id: str
    session_id: str
    user_id: str  # the session's owner
    turn_index: int
    step: int
    text: str
    tokenizer: str
    usage: UsageTotals
    started_at: float
    updated_at: float
    owner: str  # the process that wrote it last


@dataclass(frozen=True, slots=True)
class Busy:
    """Another process's turn holds the session; its lease runs until ``until`` (Unix
    seconds) unless renewed."""

    until: float


@dataclass(frozen=True, slots=True)
class Held:
    """The session's lease is this process's now. Read as the claim took it (None: not
    read, where store/engine's ``writes_in_with`` is off, or not known): ``version``, the
    session's version, newer than any write of the turn that held it before;
    ``log_open``, whether the session's event log (the table log) ends with a line other
    than session_end; ``session``, the session's row."""

    version: int | None
    log_open: bool | None = None
    session: Session | None = None


# The lease, the session's version and its log's last line type in one statement
# (PostgreSQL). FOR SHARE waits for a writer of the session's row or its log's end (a turn
# storing its answer, which also gives the lease up in that transaction; a line appended)
# and reads the row as that writer committed it. The last line itself is read as the
# statement began: NULL when it came later, or when the log has no end row (then the
# caller reads the log). The session's row comes with them, and only its user's turn
# claims it. Parameters: session, tenant, any_user (whoever owns it), user, owner, now.
_CLAIM_SQL = (
    f"WITH s AS (SELECT {session_columns('')}, version FROM sessions"
    "  WHERE id = :session AND tenant_id = :tenant FOR SHARE),"
    " e AS (SELECT last_line FROM event_log_ends"
    "  WHERE tenant_id = :tenant AND session_id = :session FOR SHARE),"
    " claimed AS (INSERT INTO partial_answers (session_id, tenant_id, turn_index, owner,"
    "  started_at, updated_at) SELECT id, tenant_id, 0, :owner, :now, :now FROM s"
    "  WHERE :any_user OR user_id = :user"
    "  ON CONFLICT (session_id) DO NOTHING RETURNING 1)"
    f" SELECT {session_columns('s.')}, s.version, EXISTS (SELECT 1 FROM claimed) AS claimed,"
    " (SELECT l.data::json ->> 'type' <> 'session_end' FROM event_lines l JOIN e"
    "  ON l.line = e.last_line WHERE l.tenant_id = :tenant AND l.session_id = :session)"
    "  AS log_open"
    " FROM s"
)


class PartialAnswerRepo:
    def __init__(self, db: Database, lease_seconds: float) -> None:
        self._db = db
        self.owner = uuid.uuid4().hex  # this process's rows
        self.lease_seconds = lease_seconds
        # Other processes run turns on the same database: a turn claims its session's
        # row before it starts (``claim``), renews it while it runs and gives back a claim
        # it stored nothing under (``release``).
        self.turns_hold_leases = db.shared_between_processes

    def opening(
        self, tenant_id: str, session_id: str, turn_index: int, tokenizer: str, step: int = 0
    ) -> JoinedWrite:
        """The turn's row, empty, at ``step`` (a turn continued with tool results goes on
        from its earlier steps); a row left from an earlier turn is replaced. Written with
        the turn's input (ConversationRepo's ``also``)."""
        now = time.time()
        upsert = (
            " ON CONFLICT (session_id) DO UPDATE SET tenant_id = excluded.tenant_id,"
            "  turn_index = excluded.turn_index, step = excluded.step, text = '',"
            "  tokenizer = excluded.tokenizer, prompt_tokens = 0, completion_tokens = 0,"
            "  prompt_tokens_estimate = 0, cache_read_tokens = 0, cache_write_tokens = 0,"
            "  usage_estimated = 0, started_at = excluded.started_at,"
            "  updated_at = excluded.updated_at, owner = excluded.owner"
        )
        columns = (
            "INSERT INTO partial_answers (session_id, tenant_id, turn_index, step, text,"
            "  tokenizer, started_at, updated_at, owner)"
        )
        # Typed: in a SELECT list PostgreSQL takes an untyped parameter for text.
        values = (
            "?, ?, CAST(? AS INTEGER), CAST(? AS INTEGER), '', ?,"
            " CAST(? AS DOUBLE PRECISION), CAST(? AS DOUBLE PRECISION), ?"
        )
        return JoinedWrite(
            f"{columns} VALUES ({values}){upsert}",
            f"{columns} SELECT {values} FROM written{upsert}",
            (session_id, tenant_id, turn_index, step, tokenizer, now, now, self.owner),
        )

    def emptying(self, session_id: str, step: int, usage: UsageTotals) -> JoinedWrite:
        """The row with no text, for step ``step`` (the text so far is stored)."""
        sql, params = _update(session_id, step, "", usage, self.owner)
        return JoinedWrite(sql, sql + _WITH_WRITTEN, params)

    def deleting(self, session_id: str, owner: str | None = None) -> JoinedWrite:
        """No row: the turn's answer is stored. Only a row of ``owner`` (this process
        when None) goes: a turn that lost its lease leaves its successor's row alone."""
        sql = "DELETE FROM partial_answers WHERE session_id = ? AND owner = ?"
        return JoinedWrite(
            sql, sql + _WITH_WRITTEN, (session_id, self.owner if owner is None else owner)
        )

    async def save(self, session_id: str, step: int, text: str, usage: UsageTotals) -> None:
        """Replace the row's text; no row of this process (the turn ended, its session was
        deleted) is no error."""
        await self._db.execute_alone(*_update(session_id, step, text, usage, self.owner))

    async def renew(self, session_id: str) -> bool:
        """Keep the session's lease: whether this process still holds it."""
        cursor = await self._db.execute_alone(
            "UPDATE partial_answers SET updated_at = ? WHERE session_id = ? AND owner = ?",
            (time.time(), session_id, self.owner),
        )
        return cursor.rowcount > 0

    async def claim(
        self, tenant_id: str, session_id: str, user_id: str | None = None
    ) -> Busy | PartialAnswer | Held:
        """Take the session's lease for a turn about to start. Held: it is this process's
        now (a row of turn 0, until the turn's input opens it). Busy: another process's
        turn runs. A PartialAnswer: the row of a turn whose process stopped renewing it,
        now this process's, for the caller to close (then to claim again). Raises
        SessionNotFound when the session is not the tenant's, or not ``user_id``'s
        (None: whoever's): another user's session is neither claimed nor waited for."""
        while True:
            now = time.time()
            lease = await self._take(tenant_id, session_id, user_id, now)
            if lease is not None:
                return lease
            rows = await self._db.reader.execute_fetchall(
                f"SELECT {_COLUMNS} FROM partial_answers p JOIN sessions s"
                " ON s.id = p.session_id WHERE p.session_id = ? AND p.tenant_id = ?"
                " AND (? OR s.user_id = ?)",
                (session_id, tenant_id, *_user_params(user_id)),
            )
            if not rows:
                if await self._session_missing(tenant_id, session_id, user_id):
                    raise SessionNotFound(session_id)
                continue  # the row went between the two statements
            held = _partial(rows[0])
            # A row of this process is a turn of its own that ended without removing it
            # (this process runs one turn of a session at a time).
            if held.owner != self.owner and held.updated_at > now - self.lease_seconds:
                return Busy(held.updated_at + self.lease_seconds)
            taken = await self.take_over(held)
            if taken is not None:
                return taken
            # Renewed or taken meanwhile: look again.

    async def _take(
        self, tenant_id: str, session_id: str, user_id: str | None, now: float
    ) -> Held | None:
        """The lease, when no row holds it (None: one does, or there is no session of
        ``user_id``)."""
        if self._db.writes_in_with:
            params = {
                "session": session_id,
                "tenant": tenant_id,
                "any_user": user_id is None,
                "user": user_id or "",
                "owner": self.owner,
                "now": now,
            }
            row = await (await self._db.execute_alone(_CLAIM_SQL, params)).fetchone()
            if row is None or not row["claimed"]:
                return None
            log_open = row["log_open"]
            return Held(
                int(row["version"]),
                None if log_open is None else bool(log_open),
                session_from_row(row),
            )
        cursor = await self._db.execute_alone(
            "INSERT INTO partial_answers (session_id, tenant_id, turn_index, owner,"
            " started_at, updated_at) SELECT id, tenant_id, 0, ?, ?, ? FROM sessions"
            " WHERE id = ? AND tenant_id = ? AND (? OR user_id = ?)"
            " ON CONFLICT (session_id) DO NOTHING",
            (self.owner, now, now, session_id, tenant_id, *_user_params(user_id)),
        )
        return Held(None) if cursor.rowcount > 0 else None

    async def release(self, session_id: str, owner: str | None = None) -> None:
        """Give up a claim (of ``owner``, this process when None) whose turn stored
        nothing: no input, so no turn to close."""
        await self._db.execute_alone(
            "DELETE FROM partial_answers WHERE session_id = ? AND owner = ? AND turn_index = 0",
            (session_id, self.owner if owner is None else owner),
        )

    async def left_behind(self, unrenewed_for: float = 0.0) -> list[PartialAnswer]:
        """Every row not renewed for ``unrenewed_for`` seconds, oldest turn first."""
        rows = await self._db.reader.execute_fetchall(
            f"SELECT {_COLUMNS} FROM partial_answers p JOIN sessions s ON s.id = p.session_id"
            " WHERE p.updated_at <= ? ORDER BY p.started_at, p.session_id",
            (time.time() - unrenewed_for,),
        )
        return [_partial(r) for r in rows]

    async def abandoned(self) -> AsyncIterator[PartialAnswer]:
        """The rows of turns no process runs any more, for the caller to close, oldest turn
        first. With one process per database, every row (the process's last end cut those
        turns off); where processes share it, the rows whose lease expired, each made this
        process's as it comes (one renewed or taken by another process meanwhile is left:
        its turn runs, or the other process closes it)."""
        if not self.turns_hold_leases:
            for left in await self.left_behind():
                yield left
            return
        for found in await self.left_behind(self.lease_seconds):
            taken = await self.take_over(found)
            if taken is not None:
                yield taken

    async def take_over(self, left: PartialAnswer) -> PartialAnswer | None:
        """``left``'s row made this process's, unless its owner renewed it (or another
        process took it) since it was read."""
        now = time.time()
        cursor = await self._db.execute_alone(
            "UPDATE partial_answers SET owner = ?, updated_at = ?"
            " WHERE session_id = ? AND owner = ? AND updated_at = ?",
            (self.owner, now, left.session_id, left.owner, left.updated_at),
        )
        return replace(left, owner=self.owner, updated_at=now) if cursor.rowcount > 0 else None

    async def _session_missing(self, tenant_id: str, session_id: str, user_id: str | None) -> bool:
        """Whether the tenant has no such session (of ``user_id``, unless None)."""
        rows = await self._db.reader.execute_fetchall(
            "SELECT 1 FROM sessions WHERE id = ? AND tenant_id = ? AND (? OR user_id = ?)",
            (session_id, tenant_id, *_user_params(user_id)),
        )
        return not rows


def _user_params(user_id: str | None) -> tuple[bool, str]:
    """The parameters of ``(? OR user_id = ?)``: any user's session when None."""
    return user_id is None, user_id or ""


# A JoinedWrite's condition in WITH: only with the row of the statement's own write.
_WITH_WRITTEN = " AND EXISTS (SELECT 1 FROM written)"


def _update(
    session_id: str, step: int, text: str, u: UsageTotals, owner: str
) -> tuple[str, tuple[object, ...]]:
    """The statement that sets the row's step, text and usage, and its parameters."""
    return (
        "UPDATE partial_answers SET step = ?, text = ?, prompt_tokens = ?,"
        " completion_tokens = ?, prompt_tokens_estimate = ?, cache_read_tokens = ?,"
        " cache_write_tokens = ?, usage_estimated = ?, updated_at = ?"
        " WHERE session_id = ? AND owner = ?",
        (step, text, *u[:5], int(u.estimated), time.time(), session_id, owner),
    )


def _partial(r: Row) -> PartialAnswer:
    return PartialAnswer(
        tenant_id=r["tenant_id"],
        session_id=r["session_id"],
        user_id=r["user_id"],
        turn_index=int(r["turn_index"]),
        step=int(r["step"]),
        text=r["text"],
        tokenizer=r["tokenizer"],
        usage=usage_totals(r, bool(r["usage_estimated"])),
        started_at=float(r["started_at"]),
        updated_at=float(r["updated_at"]),
        owner=r["owner"],
    )

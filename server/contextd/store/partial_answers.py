"""Partial answers: what a running chat turn has streamed so far, one row per session.

A turn's row is opened in the transaction that stores the turn's input, its text replaced
while a model step streams (``save``), emptied when a step's text is stored as a message
the turn goes on after, and deleted in the transaction that stores the turn's answer. The
conversation never holds a half answer: history reads do not see these rows.

Only one process uses a data directory (store/data_lock.py): at start, every row left is
a turn the server's end cut off (``left_behind``). Processes sharing one database
would need a lease on the rows to tell a live turn's from an abandoned one.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from contextd.store.database import Connection, Database
from contextd.store.sessions import UsageTotals

# A statement to run inside a ConversationRepo transaction, with the messages it stores.
InTransaction = Callable[[Connection], Awaitable[None]]


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


class PartialAnswerRepo:
    def __init__(self, db: Database) -> None:
        self._db = db

    def opening(
        self, tenant_id: str, session_id: str, turn_index: int, tokenizer: str
    ) -> InTransaction:
        """The turn's row, empty (a row left from an earlier turn is replaced)."""

        async def run(conn: Connection) -> None:
            now = time.time()
            await conn.execute(
                "INSERT INTO partial_answers (session_id, tenant_id, turn_index, step, text,"
                "  tokenizer, prompt_tokens, completion_tokens, prompt_tokens_estimate,"
                "  started_at, updated_at) VALUES (?, ?, ?, 0, '', ?, 0, 0, 0, ?, ?)"
                " ON CONFLICT (session_id) DO UPDATE SET tenant_id = excluded.tenant_id,"
                "  turn_index = excluded.turn_index, step = 0, text = '',"
                "  tokenizer = excluded.tokenizer, prompt_tokens = 0, completion_tokens = 0,"
                "  prompt_tokens_estimate = 0, started_at = excluded.started_at,"
                "  updated_at = excluded.updated_at",
                (session_id, tenant_id, turn_index, tokenizer, now, now),
            )

        return run

    def emptying(self, session_id: str, step: int, usage: UsageTotals) -> InTransaction:
        """The row with no text, for step ``step`` (the text so far is stored)."""

        async def run(conn: Connection) -> None:
            await _update(conn, session_id, step, "", usage)

        return run

    def deleting(self, session_id: str) -> InTransaction:
        """No row: the turn's answer is stored."""

        async def run(conn: Connection) -> None:
            await conn.execute("DELETE FROM partial_answers WHERE session_id = ?", (session_id,))

        return run

    async def save(self, session_id: str, step: int, text: str, usage: UsageTotals) -> None:
        """Replace the row's text; no row (the turn ended, its session was deleted) is no
        error."""
        async with self._db.transaction() as conn:
            await _update(conn, session_id, step, text, usage)

    async def left_behind(self) -> list[PartialAnswer]:
        """Every row, oldest turn first."""
        rows = await self._db.reader.execute_fetchall(
            "SELECT p.tenant_id, p.session_id, s.user_id, p.turn_index, p.step, p.text,"
            " p.tokenizer, p.prompt_tokens, p.completion_tokens, p.prompt_tokens_estimate,"
            " p.started_at, p.updated_at"
            " FROM partial_answers p JOIN sessions s ON s.id = p.session_id"
            " ORDER BY p.started_at, p.session_id"
        )
        return [
            PartialAnswer(
                tenant_id=r[0],
                session_id=r[1],
                user_id=r[2],
                turn_index=int(r[3]),
                step=int(r[4]),
                text=r[5],
                tokenizer=r[6],
                usage=(int(r[7]), int(r[8]), int(r[9])),
                started_at=float(r[10]),
                updated_at=float(r[11]),
            )
            for r in rows
        ]


async def _update(conn: Connection, session_id: str, step: int, text: str, u: UsageTotals) -> None:
    await conn.execute(
        "UPDATE partial_answers SET step = ?, text = ?, prompt_tokens = ?,"
        " completion_tokens = ?, prompt_tokens_estimate = ?, updated_at = ?"
        " WHERE session_id = ?",
        (step, text, *u, time.time(), session_id),
    )

"""Messages persisted per second by the SQLite store, with 50 concurrent sessions and with one.

``ConversationRepo.append`` on a real SQLite file (WAL, ``synchronous=NORMAL`` as the server
runs, or ``--synchronous FULL``), each call appending one message with two token counts, as
a chat turn stores the user's message or the assistant's answer. Sides, in alternating
rounds of a fixed number of messages each:

* 50 sessions: 50 asyncio tasks, each appending to its own session, one message per call;
* 1 session, 50 writers: the same 50 tasks all appending to one session;
* 1 session, 1 writer: one task appending one message per call, each call awaited.

Every append is one write transaction through the Database's single writer connection
(BEGIN IMMEDIATE, the INSERT, the token counts, COMMIT), run on the event loop's thread.
For reference only, the last row runs the same SQL with plain sqlite3 in a loop, without
the repository: what a transaction costs SQLite itself.

There is no target: the RESULT line carries the ratio 50 sessions / 1 session (1 writer),
``target=none`` and PASS whenever the run completed and every message was stored.
Run: ``python bench/store_writes.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from _common import SHORT_HISTORY, machine_note, median, print_table
from contextd.core.identity import DEFAULT_TENANT
from contextd.core.messages import ChatMessage, Role
from contextd.store.conversation import ConversationRepo
from contextd.store.engine.sqlite import SqliteDatabase
from contextd.store.message_writes import insert_statement
from contextd.store.models import NewMessage, Session
from contextd.store.sessions import SessionRepo

NAME = "store_writes"
SESSIONS = 50
USER = "bench-user"

Side = Callable[[int], Awaitable[None]]


def new_message(i: int) -> NewMessage:
    role, text = SHORT_HISTORY[i % len(SHORT_HISTORY)]
    size = len(text.encode("utf-8"))
    return NewMessage(
        ChatMessage(Role(role), text),
        turn_index=i // 2,
        tokens={"cl100k_base": size // 4 + 3, "estimate": (size + 3) // 4 + 3},
    )


def spread(messages: int, tasks: int) -> list[int]:
    """``messages`` split as evenly as possible over ``tasks``."""
    return [messages // tasks + (1 if k < messages % tasks else 0) for k in range(tasks)]


def concurrent_side(repo: ConversationRepo, targets: list[Session]) -> Side:
    async def run(messages: int) -> None:
        async def task(session: Session, n: int) -> None:
            for i in range(n):
                await repo.append(session.id, USER, [new_message(i)])

        shares = spread(messages, SESSIONS)
        await asyncio.gather(*(task(targets[k % len(targets)], n) for k, n in enumerate(shares)))

    return run


def sequential_side(repo: ConversationRepo, session: Session) -> Side:
    async def run(messages: int) -> None:
        for i in range(messages):
            await repo.append(session.id, USER, [new_message(i)])

    return run


def plain_sqlite_append(path: Path, session_id: str, messages: int, synchronous: str) -> float:
    """Seconds for ``messages`` one-message transactions of the same SQL, without the repository."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        t0 = time.perf_counter()
        for i in range(messages):
            new = new_message(i)
            conn.execute("BEGIN IMMEDIATE")
            sql, params = insert_statement(session_id, (DEFAULT_TENANT, USER), [new], time.time())
            [(mid, _)] = conn.execute(sql, params).fetchall()
            conn.executemany(
                "INSERT OR IGNORE INTO message_tokens (message_id, tokenizer, tokens)"
                " VALUES (?, ?, ?)",
                [(mid, name, count) for name, count in new.tokens.items()],
            )
            conn.execute("COMMIT")
        return time.perf_counter() - t0
    finally:
        conn.close()


async def stored_count(db: SqliteDatabase) -> int:
    rows = list(await db.reader.execute_fetchall("SELECT COUNT(*) FROM conversation"))
    return int(rows[0][0])


async def measure(args: argparse.Namespace, directory: Path) -> int:
    db = await SqliteDatabase.open(directory / "contextd.sqlite3", synchronous=args.synchronous)
    try:
        sessions, repo = SessionRepo(db), ConversationRepo(db)
        many = [await sessions.create(USER, title=f"bench {k}") for k in range(SESSIONS)]
        shared = await sessions.create(USER, title="bench shared")
        single = await sessions.create(USER, title="bench single")
        reference = await sessions.create(USER, title="bench plain sqlite3")
        sides: list[tuple[str, Side]] = [
            (f"{SESSIONS} sessions, {SESSIONS} writers", concurrent_side(repo, many)),
            (f"1 session, {SESSIONS} writers", concurrent_side(repo, [shared])),
            ("1 session, 1 writer", sequential_side(repo, single)),
        ]
        await sides[0][1](args.messages // 10)  # warm-up
        rates: dict[str, list[float]] = {label: [] for label, _ in sides}
        for r in range(args.rounds):
            order = sides if r % 2 == 0 else sides[::-1]
            for label, side in order:
                before = await stored_count(db)
                t0 = time.perf_counter()
                await side(args.messages)
                elapsed = time.perf_counter() - t0
                stored = await stored_count(db) - before
                if stored != args.messages:
                    print(f"{label}: {stored} messages stored instead of {args.messages}")
                    print(f"RESULT {NAME} ratio=0.00 target=none FAIL")
                    return 0
                rates[label].append(args.messages / elapsed)
        plain = [
            args.messages
            / await asyncio.to_thread(
                plain_sqlite_append, db.path, reference.id, args.messages, args.synchronous
            )
            for _ in range(args.rounds)
        ]
    finally:
        await db.close()

    awaits = "BEGIN, INSERT ... RETURNING, token counts, COMMIT"
    rows = [
        [label, f"{median(r):,.0f}", f"{min(r):,.0f}-{max(r):,.0f}", f"{1e3 / median(r):.2f}"]
        for label, r in rates.items()
    ]
    rows.append(
        [
            "reference: plain sqlite3, no repository",
            f"{median(plain):,.0f}",
            f"{min(plain):,.0f}-{max(plain):,.0f}",
            f"{1e3 / median(plain):.3f}",
        ]
    )
    print_table(["side", "messages/s (median)", "range over rounds", "ms/message"], rows)
    labels = list(rates)
    many_rate, single_rate = median(rates[labels[0]]), median(rates[labels[2]])
    ratio = many_rate / single_rate
    print(
        f"one append = one transaction of 4 awaits ({awaits}); synchronous={args.synchronous}, "
        f"WAL; {args.rounds} rounds x {args.messages} messages per side"
    )
    print(
        f"messages/s: {SESSIONS} sessions {many_rate:,.0f}, 1 session {single_rate:,.0f} "
        f"(ratio {ratio:.2f})"
    )
    print(f"RESULT {NAME} ratio={ratio:.2f} target=none PASS")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--rounds", type=int, help="rounds per side (default 5, quick 2)")
    parser.add_argument("--messages", type=int, help="messages per round (default 3000)")
    parser.add_argument("--synchronous", choices=("NORMAL", "FULL"), default="NORMAL")
    args = parser.parse_args()
    args.rounds = args.rounds or (2 if args.quick else 5)
    args.messages = args.messages or (200 if args.quick else 3000)
    print(machine_note(), flush=True)
    with tempfile.TemporaryDirectory(prefix="contextd-bench-") as directory:
        return asyncio.run(measure(args, Path(directory)))


if __name__ == "__main__":
    sys.exit(main())

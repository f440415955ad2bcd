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
For reference only, a row runs the same SQL with plain sqlite3 in a loop, without
the repository: what a transaction costs SQLite itself.

The event log is measured in the same rounds: one task appending one event per call
(``EventStore.append``, a chat turn's line) to one session's file, each append holding the
file's lock (store/event_log/files.py). Two reference rows make an append's system calls
in a loop, without Python's encoding of the event: with the lock (open, flock, fstat,
pread, write, close) and without it; what the lock costs an append is their difference,
measured in one run.

There is no target: the RESULT line carries the ratio 50 sessions / 1 session (1 writer),
``target=none`` and PASS whenever the run completed and every message was stored.
Run: ``python bench/store_writes.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from _common import SHORT_HISTORY, machine_note, median, print_table
from contextd.core.identity import DEFAULT_TENANT
from contextd.core.messages import ChatMessage, Role
from contextd.store.conversation import ConversationRepo, insert_statement
from contextd.store.engine.database import Database
from contextd.store.engine.sqlite import DB_FILENAME
from contextd.store.event_log.events import HISTORY_DIR, EventStore
from contextd.store.event_log.files import log_path
from contextd.store.models import NewMessage, Session
from contextd.store.open import open_store
from contextd.store.sessions import SessionRepo

NAME = "store_writes"
EVENT_LOG = "event log, 1 session, 1 writer"
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


def event_text(i: int) -> str:
    return SHORT_HISTORY[i % len(SHORT_HISTORY)][1]


def event_log_side(log: EventStore, session_id: str) -> Side:
    async def run(events: int) -> None:
        for i in range(events):
            await log.append(session_id, "observation", turn=1, step=i, content=event_text(i))

    return run


def lines_in(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def plain_file_append(path: Path, events: int, lock: bool) -> float:
    """Seconds for ``events`` appends of a line of an event's size with an append's system
    calls, with or without its lock."""
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    lines = [(event_text(i) * 2 + "x" * 120 + "\n").encode() for i in range(len(SHORT_HISTORY))]
    t0 = time.perf_counter()
    for i in range(events):
        fd = os.open(path, flags, 0o600)
        try:
            if lock:
                fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size:
                os.pread(fd, 1, size - 1)
            os.write(fd, lines[i % len(lines)])
        finally:
            os.close(fd)
    return time.perf_counter() - t0


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


async def stored_count(db: Database) -> int:
    rows = list(await db.reader.execute_fetchall("SELECT COUNT(*) FROM conversation"))
    return int(rows[0][0])


async def measure(args: argparse.Namespace, directory: Path) -> int:
    store = await open_store("", directory, sqlite_synchronous=args.synchronous)
    db = store.db
    try:
        sessions, repo = SessionRepo(db), ConversationRepo(db)
        many = [await sessions.create(USER, title=f"bench {k}") for k in range(SESSIONS)]
        shared = await sessions.create(USER, title="bench shared")
        single = await sessions.create(USER, title="bench single")
        reference = await sessions.create(USER, title="bench plain sqlite3")
        log = store.event_log()
        # SQLite's: files in the data directory.
        single_log = log_path(directory / HISTORY_DIR, DEFAULT_TENANT, single.id)
        sides: list[tuple[str, Side]] = [
            (f"{SESSIONS} sessions, {SESSIONS} writers", concurrent_side(repo, many)),
            (f"1 session, {SESSIONS} writers", concurrent_side(repo, [shared])),
            ("1 session, 1 writer", sequential_side(repo, single)),
            (EVENT_LOG, event_log_side(log, single.id)),
        ]
        await sides[0][1](args.messages // 10)  # warm-up
        rates: dict[str, list[float]] = {label: [] for label, _ in sides}
        plain_log: dict[bool, list[float]] = {True: [], False: []}
        for r in range(args.rounds):
            order = sides if r % 2 == 0 else sides[::-1]
            for label, side in order:
                count = lines_in(single_log) if label == EVENT_LOG else await stored_count(db)
                t0 = time.perf_counter()
                await side(args.messages)
                elapsed = time.perf_counter() - t0
                if label == EVENT_LOG:
                    stored = lines_in(single_log) - count
                else:
                    stored = await stored_count(db) - count
                if stored != args.messages:
                    print(f"{label}: {stored} stored instead of {args.messages}")
                    print(f"RESULT {NAME} ratio=0.00 target=none FAIL")
                    return 0
                rates[label].append(args.messages / elapsed)
            for lock in (r % 2 == 0, r % 2 == 1):
                seconds = plain_file_append(directory / "plain.jsonl", args.messages, lock)
                plain_log[lock].append(args.messages / seconds)
        plain = [
            args.messages
            / await asyncio.to_thread(
                plain_sqlite_append,
                directory / DB_FILENAME,
                reference.id,
                args.messages,
                args.synchronous,
            )
            for _ in range(args.rounds)
        ]
    finally:
        await store.close()

    awaits = "BEGIN, INSERT ... RETURNING, token counts, COMMIT"
    rows = [
        [label, f"{median(r):,.0f}", f"{min(r):,.0f}-{max(r):,.0f}", f"{1e3 / median(r):.2f}"]
        for label, r in rates.items()
    ]
    for label, reference_rates in (
        ("reference: plain sqlite3, no repository", plain),
        ("reference: an append's system calls, with the lock", plain_log[True]),
        ("reference: an append's system calls, no lock", plain_log[False]),
    ):
        rows.append(
            [
                label,
                f"{median(reference_rates):,.0f}",
                f"{min(reference_rates):,.0f}-{max(reference_rates):,.0f}",
                f"{1e3 / median(reference_rates):.4f}",
            ]
        )
    print_table(["side", "messages or events/s (median)", "range over rounds", "ms each"], rows)
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
    locked, unlocked = (1e6 / median(plain_log[lock]) for lock in (True, False))
    print(
        f"event log: {1e6 / median(rates[EVENT_LOG]):.1f} us an append; its system calls "
        f"{locked:.1f} us with the lock, {unlocked:.1f} us without (the lock: "
        f"{locked - unlocked:.1f} us)"
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

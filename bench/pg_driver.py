"""Which PostgreSQL driver contextd uses: psycopg 3 (with psycopg_pool) against asyncpg.

A throwaway PostgreSQL (tests/support/postgres.py) and, for each driver, a pool of 10
connections running what a chat turn asks of the store: one transaction that locks the
session's row, inserts a message and bumps the session's counters, then a read of the
session's last 20 messages. Sides run in alternating rounds, at 1 and at 20 concurrent
callers, and the table gives turns per second.

There is no target: the RESULT line carries asyncpg / psycopg at 20 callers, ``target=none``
and PASS whenever both drivers stored every message. Run: ``python bench/pg_driver.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support

import asyncpg
import psycopg
from _common import machine_note, median, print_table
from psycopg_pool import AsyncConnectionPool

from tests.support.postgres import running_postgres

NAME = "pg_driver"
SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, message_count INTEGER NOT NULL,
  updated_at DOUBLE PRECISION NOT NULL);
CREATE TABLE messages (id BIGSERIAL PRIMARY KEY, session_id TEXT NOT NULL REFERENCES sessions(id),
  role TEXT NOT NULL, content TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL);
CREATE INDEX messages_session ON messages (session_id, id);
"""
TEXT = "The meeting moved to Thursday at ten; bring the quarterly figures and the draft."

Turn = Callable[[str], Awaitable[None]]


async def _psycopg_side(url: str) -> tuple[Turn, Callable[[], Awaitable[None]]]:
    pool = AsyncConnectionPool(url, min_size=10, max_size=10, open=False)
    await pool.open(wait=True)

    async def turn(session_id: str) -> None:
        async with pool.connection() as conn:
            async with conn.transaction():
                await conn.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (session_id,))
                await conn.execute(
                    "INSERT INTO messages (session_id, role, content, created_at)"
                    " VALUES (%s, 'user', %s, %s)",
                    (session_id, TEXT, time.time()),
                )
                await conn.execute(
                    "UPDATE sessions SET message_count = message_count + 1, updated_at = %s"
                    " WHERE id = %s",
                    (time.time(), session_id),
                )
            cur = await conn.execute(
                "SELECT id, role, content FROM messages WHERE session_id = %s"
                " ORDER BY id DESC LIMIT 20",
                (session_id,),
            )
            await cur.fetchall()

    return turn, pool.close


async def _asyncpg_side(url: str) -> tuple[Turn, Callable[[], Awaitable[None]]]:
    pool = await asyncpg.create_pool(url, min_size=10, max_size=10)

    async def turn(session_id: str) -> None:
        async with pool.acquire() as conn:
            async with conn.transaction():
                await conn.execute("SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE", session_id)
                await conn.execute(
                    "INSERT INTO messages (session_id, role, content, created_at)"
                    " VALUES ($1, 'user', $2, $3)",
                    session_id,
                    TEXT,
                    time.time(),
                )
                await conn.execute(
                    "UPDATE sessions SET message_count = message_count + 1, updated_at = $1"
                    " WHERE id = $2",
                    time.time(),
                    session_id,
                )
            await conn.fetch(
                "SELECT id, role, content FROM messages WHERE session_id = $1"
                " ORDER BY id DESC LIMIT 20",
                session_id,
            )

    return turn, pool.close


async def _round(turn: Turn, callers: int, turns_each: int) -> float:
    async def caller(index: int) -> None:
        for _ in range(turns_each):
            await turn(f"s{index}")

    start = time.perf_counter()
    await asyncio.gather(*(caller(i) for i in range(callers)))
    return callers * turns_each / (time.perf_counter() - start)


async def _main(rounds: int, turns: int) -> int:
    with running_postgres() as server:
        results: dict[tuple[str, int], list[float]] = {}
        sides = {}
        for name in ("psycopg", "asyncpg"):
            url = server.create_database(name)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(SCHEMA)
                for i in range(20):
                    conn.execute("INSERT INTO sessions VALUES (%s, 0, 0)", (f"s{i}",))
            factory = _psycopg_side if name == "psycopg" else _asyncpg_side
            sides[name] = await factory(url)
        for _ in range(rounds):
            for callers in (1, 20):
                for name, (turn, _close) in sides.items():
                    rate = await _round(turn, callers, max(1, turns // callers))
                    results.setdefault((name, callers), []).append(rate)
        for _turn, close in sides.values():
            await close()
        complete = True
        for name in sides:
            with psycopg.connect(server.url_for(name)) as conn:
                stored = conn.execute("SELECT count(*) FROM messages").fetchone()
                counted = conn.execute("SELECT sum(message_count) FROM sessions").fetchone()
                complete &= stored is not None and counted is not None and stored[0] == counted[0]
    rows = []
    for callers in (1, 20):
        pg = median(results[("psycopg", callers)])
        ap = median(results[("asyncpg", callers)])
        rows.append([str(callers), f"{pg:,.0f}", f"{ap:,.0f}", f"{ap / pg:.2f}"])
    print(machine_note())
    print_table(["callers", "psycopg turns/s", "asyncpg turns/s", "asyncpg/psycopg"], rows)
    ratio = median(results[("asyncpg", 20)]) / median(results[("psycopg", 20)])
    print(f"RESULT {NAME} ratio={ratio:.2f} target=none {'PASS' if complete else 'FAIL'}")
    return 0 if complete else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    args = parser.parse_args()
    return asyncio.run(_main(rounds=2 if args.quick else 7, turns=100 if args.quick else 600))


if __name__ == "__main__":
    raise SystemExit(main())

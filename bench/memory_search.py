"""Memory search on 100,000 memories of one user: contextd's MemoryRepo.search against LIKE.

One SQLite file built by contextd's own migrations holds 100,000 memories of one user
(short facts, mostly Chinese, some English, some mixed, ages spread over two years) and
5,000 memories of 200 other users, all loaded with ``MemoryRepo.add_many``. The queries are
two-character Chinese words, English words and short phrases (a few match nothing).

- contextd: ``MemoryRepo.search(user, query, limit=10)``: per-user FTS5 terms (Chinese
  characters and bigrams, words), bm25 relevance combined with recency.
- baseline: ``SELECT ... FROM memories WHERE user_id = ? AND content LIKE '%q%'
  ORDER BY updated_at DESC LIMIT 10`` on the same table, given its best index,
  ``(user_id, updated_at DESC)``, created for this run only.

Both sides run on the same read connection of contextd's Database (on the event loop's
thread).
Before timing, the script checks that the index finds, for every Chinese word query, exactly
the memories LIKE finds, and that no search returns another user's memory. Rounds alternate
the sides. The target is absolute, **search p50 <= 10 ms**; the RESULT ratio is LIKE p50 /
search p50. Run: ``python bench/memory_search.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from _common import machine_note, median, print_table, result_line
from _memory_data import QUERIES_ZH2, memory_texts, queries
from contextd.store.engine.database import Database
from contextd.store.memory.index import user_key
from contextd.store.memory.repository import MemoryRepo
from contextd.store.open import open_store

NAME = "memory_search"
TARGET_P50_MS = 10.0
MAIN_USER = "user-main"
OTHER_USERS = 200
DAY = 86400.0
NOW = 1_795_000_000.0  # fixed "now": ages and recency are the same on every run

LIKE_SQL = (
    "SELECT id, content FROM memories WHERE user_id = ? AND content LIKE ? ESCAPE '\\'"
    " ORDER BY updated_at DESC LIMIT 10"
)

Call = Callable[[str], Awaitable[int]]


def like_pattern(query: str) -> str:
    escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * fraction))]


async def load(db: Database, repo: MemoryRepo, n_main: int, n_other: int) -> float:
    """Load the memories; returns the seconds add_many took for the main user."""
    texts = memory_texts(n_main + n_other)
    rng = random.Random(99)
    # Memories accumulate over two years: later ones are newer.
    stamps = sorted(NOW - rng.random() * 730 * DAY for _ in range(n_main))
    t0 = time.perf_counter()
    created = await repo.add_many(MAIN_USER, texts[:n_main], timestamps=stamps)
    seconds = time.perf_counter() - t0
    assert created == n_main, (created, n_main)
    others = texts[n_main:]
    for u in range(OTHER_USERS):
        mine = others[u::OTHER_USERS]
        await repo.add_many(
            f"user-{u}", mine, timestamps=[NOW - (i + 1) * DAY for i in range(len(mine))]
        )
    async with db.transaction() as conn:
        # The baseline's best index: newest first within a user, so LIMIT 10 can stop early.
        await conn.execute(
            "CREATE INDEX IF NOT EXISTS bench_memories_user_updated"
            " ON memories (user_id, updated_at DESC)"
        )
        await conn.execute("ANALYZE")
    return seconds


async def database_sizes(db: Database) -> str:
    """File size after a checkpoint, and the search index's share of it (dbstat permitting)."""
    await db.reader.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
    total = await db.size_bytes() / 1e6  # the file: the checkpoint emptied the log
    try:
        rows = await db.reader.execute_fetchall(
            "SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'memories_fts%'"
        )
    except Exception:  # dbstat is an optional SQLite feature
        return f"database {total:.0f} MB"
    fts = next(iter(rows))[0] / 1e6
    return f"database {total:.0f} MB, of which search index {fts:.0f} MB"


async def scalar(db: Database, sql: str, args: tuple[str, ...]) -> int:
    for row in await db.reader.execute_fetchall(sql, args):
        return int(row[0])
    raise RuntimeError(f"no row from {sql}")


async def check(db: Database, repo: MemoryRepo) -> list[str]:
    """What is wrong with the search results; [] when nothing is."""
    problems: list[str] = []
    key = user_key(MAIN_USER)
    for word in QUERIES_ZH2:
        fts = await scalar(
            db,
            "SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH ?",
            (f'"{key}{word}"',),
        )
        like = await scalar(
            db,
            "SELECT COUNT(*) FROM memories WHERE user_id = ? AND content LIKE ?",
            (MAIN_USER, like_pattern(word)),
        )
        if fts != like:
            problems.append(f"{word}: the index finds {fts} memories, LIKE {like}")
        for hit in await repo.search(MAIN_USER, word, now=NOW):
            if word not in hit.memory.content or hit.memory.user_id != MAIN_USER:
                problems.append(f"{word}: unexpected hit {hit.memory}")
    small = "user-7"
    for q in queries(60):
        for hit in await repo.search(small, q, now=NOW):
            if hit.memory.user_id != small:
                problems.append(f"{q}: {small} got a memory of {hit.memory.user_id}")
    return problems


async def run_rounds(
    sides: dict[str, Call], qs: Sequence[str], rounds: int
) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            call, out = sides[name], samples[name]
            for q in qs:
                t0 = time.perf_counter()
                await call(q)
                out.append((time.perf_counter() - t0) * 1e3)
    return samples


async def bench(args: argparse.Namespace) -> int:
    n_main = 10_000 if args.quick else args.memories
    n_other = 500 if args.quick else 5_000
    n_queries = 60 if args.quick else 240
    rounds = args.rounds or (2 if args.quick else 5)
    print(machine_note(), flush=True)
    with tempfile.TemporaryDirectory(prefix="contextd-bench-") as tmp:
        store = await open_store("", Path(tmp))
        db = store.db
        try:
            repo = MemoryRepo(db, store.memory_index)
            load_s = await load(db, repo, n_main, n_other)
            sizes = await database_sizes(db)
            print(
                f"{NAME}: {n_main} memories of {MAIN_USER} (add_many {load_s:.1f} s), "
                f"{n_other} of {OTHER_USERS} other users; {sizes}; "
                f"{n_queries} queries x {rounds} alternating rounds per side"
            )
            problems = await check(db, repo)
            if problems:
                for p in problems[:20]:
                    print("check failed:", p)
                print(result_line(NAME, 0.0, TARGET_P50_MS, False))
                return 0

            async def search(q: str) -> int:
                return len(await repo.search(MAIN_USER, q, limit=10, now=NOW))

            async def search_small(q: str) -> int:
                return len(await repo.search("user-7", q, limit=10, now=NOW))

            async def like(q: str) -> int:
                return len(
                    list(await db.reader.execute_fetchall(LIKE_SQL, (MAIN_USER, like_pattern(q))))
                )

            qs = queries(n_queries)
            found = {
                "search": sum([await search(q) > 0 for q in qs]),
                "like": sum([await like(q) > 0 for q in qs]),
            }
            samples = await run_rounds({"search": search, "like": like}, qs, rounds)
            small = await run_rounds({"small": search_small}, qs, 1)
            adds = await time_adds(repo, 100 if args.quick else 300)
        finally:
            await store.close()

    rows = []
    labels = {
        "search": f"MemoryRepo.search, {MAIN_USER} ({n_main} memories)",
        "like": f"LIKE '%q%' scan, {MAIN_USER}",
        "small": f"MemoryRepo.search, user-7 ({n_other // OTHER_USERS} memories) beside them",
        "add": "MemoryRepo.add (one memory, own transaction)",
    }
    table = {**samples, **small, "add": adds}
    for name, values in table.items():
        ordered = sorted(values)
        hits = f"{found[name]}/{n_queries}" if name in found else ""
        rows.append(
            [
                labels[name],
                str(len(values)),
                f"{median(ordered):.2f}",
                f"{percentile(ordered, 0.95):.2f}",
                f"{ordered[-1]:.2f}",
                hits,
            ]
        )
    print_table(["side", "calls", "p50 ms", "p95 ms", "max ms", "queries with hits"], rows)
    search_p50 = median(samples["search"])
    like_p50 = median(samples["like"])
    ratio = like_p50 / search_p50
    p95_ratio = percentile(sorted(samples["like"]), 0.95) / percentile(
        sorted(samples["search"]), 0.95
    )
    print(
        f"search p50 {search_p50:.2f} ms (target <= {TARGET_P50_MS:g} ms); "
        f"LIKE p50 {like_p50:.2f} ms; ratio LIKE/search p50 {ratio:.2f}, p95 {p95_ratio:.2f}"
    )
    print(result_line(NAME, ratio, TARGET_P50_MS, search_p50 <= TARGET_P50_MS))
    return 0


async def time_adds(repo: MemoryRepo, n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        await repo.add(MAIN_USER, f"bench add {i}: 我今天新学了一个词，编号{i}", now=NOW)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="10,000 memories, 60 queries")
    parser.add_argument("--memories", type=int, default=100_000, help="memories of the user")
    parser.add_argument("--rounds", type=int, help="rounds per side (default 5, quick 2)")
    args = parser.parse_args()
    return asyncio.run(bench(args))


if __name__ == "__main__":
    sys.exit(main())

"""SQLite's memory search index: a contentless FTS5 table of the memories' keyed terms
(migration 0002_memories.sql says why it is laid out so), the FTS5 expression that matches
a search's terms, and the ranking statement.
"""

from __future__ import annotations

import functools
import json
import math
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from contextd.core.identity import DEFAULT_TENANT
from contextd.store.engine.database import Connection
from contextd.store.memory.index import (
    MEMORY_COLUMNS,
    Owner,
    TermHits,
    TermQuery,
    choose_terms,
    keyed_terms,
    memory_batches,
)

if TYPE_CHECKING:
    from contextd.store.engine.sqlite import SqliteDatabase


def fts_terms(
    user_id: str, content: str, tenant_id: str = DEFAULT_TENANT, *, past: bool = False
) -> str:
    """The ``memories_fts.terms`` value of a memory: its keyed terms, space-separated."""
    return " ".join(keyed_terms(user_id, content, tenant_id, past=past))


def match_expression(terms: Iterable[str]) -> str:
    """An FTS5 query that matches any of ``terms``, each quoted (never read as FTS5 syntax)."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def search_sql(columns: str, where: str = "1 = 1", narrowed: bool = False) -> str:
    """The ranking statement of a search, returning ``columns`` of the memories that meet
    ``where`` (a condition on alias ``m``) and then relevance, recency and score (the
    steps are in store/memory/repository.py's docstring).

    The owner and ``where`` are checked on the scored candidates, outside ``scored``: a
    condition on ``memories`` inside the join makes SQLite build a Bloom filter over
    every row of the table on each search, most of a search's time (bench/README.md).
    Only a collision of two users' index keys could bring another user's row that far,
    and a memory no longer true now (ended, expired) is rare among the current key's
    matches. A ``narrowed`` search (a scope, metadata, a time range, a time in the past)
    checks ``where`` on each match first, a lookup by id, before it ranks.
    """
    m_columns = ", ".join(f"m.{c.strip()}" for c in columns.split(","))
    narrow = (
        f" AND EXISTS (SELECT 1 FROM memories AS m WHERE m.id = memories_fts.rowid AND {where})"
        if narrowed
        else ""
    )
    return f"""
WITH hits AS MATERIALIZED (
    SELECT rowid AS id, -bm25(memories_fts) AS s
    FROM memories_fts
    WHERE memories_fts MATCH :match{narrow}
    ORDER BY rowid DESC
    LIMIT :max_ranked
),
candidates AS (
    SELECT id, s FROM (SELECT id, s FROM hits ORDER BY s DESC, id DESC LIMIT :candidates)
    UNION
    SELECT id, s FROM (SELECT id, s FROM hits ORDER BY id DESC LIMIT :candidates)
),
best AS (
    SELECT max(s) AS top FROM hits
),
scored AS MATERIALIZED (
    SELECT {m_columns},
           CASE WHEN best.top > 0 THEN c.s / best.top ELSE 1.0 END AS relevance,
           pow(0.5, max(0.0, :now - m.updated_at) / :half_life) AS recency
    FROM candidates AS c
    JOIN memories AS m ON m.id = c.id
    JOIN best
)
SELECT {columns}, relevance, recency,
       (1.0 - :weight) * relevance + :weight * recency AS score
FROM scored AS m
WHERE tenant_id = :tenant_id AND user_id = :user_id AND {where}
ORDER BY score DESC, updated_at DESC, id DESC
LIMIT :limit
"""


class FtsIndex:
    """SQLite: a contentless FTS5 table of keyed terms, rowid = memory id."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def prepare(self) -> None:
        """SQLite builds without the math functions get ``pow`` from Python."""
        try:
            await self._db.reader.execute_fetchall("SELECT pow(0.5, 1.0)")
        except sqlite3.OperationalError:
            await self._db.create_function("pow", 2, math.pow, deterministic=True)

    async def add(
        self, conn: Connection, memory_id: int, owner: Owner, text: str, *, past: bool = False
    ) -> None:
        tenant_id, user_id = owner
        await conn.execute(
            "INSERT INTO memories_fts (rowid, terms) VALUES (?, ?)",
            (memory_id, fts_terms(user_id, text, tenant_id, past=past)),
        )

    async def add_new(
        self, conn: Connection, owner: Owner, texts: Mapping[str, str], before: int
    ) -> None:
        tenant_id, user_id = owner
        await conn.executemany(
            "INSERT INTO memories_fts (rowid, terms) SELECT id, ? FROM memories"
            " WHERE tenant_id = ? AND user_id = ? AND content_hash = ? AND id > ?",
            [
                (fts_terms(user_id, text, tenant_id), tenant_id, user_id, digest, before)
                for digest, text in texts.items()
            ],
        )

    async def remove(
        self,
        conn: Connection,
        owner: Owner,
        rows: Sequence[tuple[int, str]],
        *,
        past: bool = False,
    ) -> None:
        # A contentless FTS5 table forgets a row only when given its terms again.
        tenant_id, user_id = owner
        await conn.executemany(
            "INSERT INTO memories_fts (memories_fts, rowid, terms) VALUES ('delete', ?, ?)",
            [
                (memory_id, fts_terms(user_id, content, tenant_id, past=past))
                for memory_id, content in rows
            ],
        )

    async def rebuild(self, conn: Connection) -> int:
        await conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')")
        count = 0
        async for rows in memory_batches(conn):
            await conn.executemany(
                "INSERT INTO memories_fts (rowid, terms) VALUES (?, ?)",
                [
                    (
                        row["id"],
                        fts_terms(
                            row["user_id"],
                            row["content"],
                            row["tenant_id"],
                            past=bool(row["superseded_by"]),
                        ),
                    )
                    for row in rows
                ],
            )
            count += len(rows)
        return count

    async def frequency(self, keyed: Sequence[str], budget: int) -> dict[str, int]:
        return {
            row["term"]: int(row["doc"])
            for row in await self._db.reader.execute_fetchall(
                "SELECT term, doc FROM memories_fts_vocab"
                " WHERE term IN (SELECT value FROM json_each(?))",
                (json.dumps(list(keyed), ensure_ascii=False),),
            )
        }

    async def search(self, terms: TermQuery, params: dict[str, Any], where: str) -> TermHits:
        # Two statements in this process: the terms' counts, then the ranking of those
        # chosen.
        frequency = await self.frequency(terms.keyed, terms.budget)
        chosen = choose_terms(frequency, terms.budget)
        if not chosen or (terms.most is not None and frequency[chosen[0]] > terms.most):
            return TermHits((), bool(frequency))
        rows = await self._db.reader.execute_fetchall(
            _search_sql(where, terms.narrowed),
            {**params, "max_ranked": terms.budget, "match": match_expression(chosen)},
        )
        return TermHits(rows, True)


@functools.lru_cache(maxsize=64)
def _search_sql(where: str, narrowed: bool) -> str:
    return search_sql(MEMORY_COLUMNS, where, narrowed)

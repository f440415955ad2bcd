"""The memories' search index on PostgreSQL, with nothing beyond core PostgreSQL.

Each memory's keyed terms (store/memory/index.py: the same terms SQLite indexes, each
prefixed with the user's key) are the lexemes of its ``search_terms`` tsvector, taken as
they are (``array_to_tsvector``; a text search parser would split them again, and under
the C locale it does not know CJK letters). A GIN index over that column finds a term's
memories in the user's own posting list. A query is the OR of the chosen terms, each
quoted, so nothing in it is read as tsquery syntax.

The ranking has SQLite's shape (store/memory/repository.py): the ``max_ranked`` newest
matches, the best text matches and the newest of them scored, relevance divided by the best
relevance of the query (0 < relevance <= 1), recency halving every half-life. Relevance is
``ts_rank`` (how many of the query's terms a memory holds) where SQLite has bm25.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from contextd.store.engine.database import Connection, Database, Row
from contextd.store.memory.index import MEMORY_COLUMNS, Owner, keyed_terms, memory_batches

_SET_TERMS = "UPDATE memories SET search_terms = array_to_tsvector(CAST(? AS TEXT[])) WHERE id = ?"

_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in MEMORY_COLUMNS.split(","))


@functools.lru_cache(maxsize=64)
def _search_sql(where: str) -> str:
    """The ranking statement for the memories that meet ``where`` (alias ``m``), checked on
    each match: the terms are a column of the memory's row, so the check costs no lookup."""
    return f"""
WITH query AS MATERIALIZED (
    SELECT CAST(:query AS TSQUERY) AS q
),
hits AS MATERIALIZED (
    SELECT m.id, CAST(ts_rank(m.search_terms, query.q) AS DOUBLE PRECISION) AS s
    FROM memories AS m, query
    WHERE m.search_terms @@ query.q AND {where}
    ORDER BY m.id DESC
    LIMIT :max_ranked
),
candidates AS (
    SELECT id, s FROM (SELECT id, s FROM hits ORDER BY s DESC, id DESC LIMIT :candidates) b
    UNION
    SELECT id, s FROM (SELECT id, s FROM hits ORDER BY id DESC LIMIT :candidates) n
),
best AS (
    SELECT MAX(s) AS top FROM hits
),
scored AS MATERIALIZED (
    SELECT {_M_COLUMNS},
           CASE WHEN best.top > 0 THEN c.s / best.top ELSE 1.0 END AS relevance,
           power(0.5, GREATEST(0.0, CAST(:now AS DOUBLE PRECISION) - m.updated_at)
                      / CAST(:half_life AS DOUBLE PRECISION)) AS recency
    FROM candidates AS c
    JOIN memories AS m ON m.id = c.id
    CROSS JOIN best
)
SELECT {MEMORY_COLUMNS}, relevance, recency,
       (1.0 - CAST(:weight AS DOUBLE PRECISION)) * relevance
       + CAST(:weight AS DOUBLE PRECISION) * recency AS score
FROM scored
WHERE tenant_id = :tenant_id AND user_id = :user_id
ORDER BY score DESC, updated_at DESC, id DESC
LIMIT :limit
"""


# Per term: how many memories hold it, counted up to a bound (budget + 1 is enough to
# choose terms, and a common term costs no more than that).
_FREQUENCY_SQL = (
    "SELECT t.term, (SELECT COUNT(*) FROM (SELECT 1 FROM memories"
    " WHERE search_terms @@ CAST(t.quoted AS TSQUERY) LIMIT ?) AS found) AS docs"
    " FROM unnest(CAST(? AS TEXT[]), CAST(? AS TEXT[])) AS t(term, quoted)"
)


def quoted(term: str) -> str:
    """A term as one tsquery lexeme, never read as tsquery syntax."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def query_expression(terms: Sequence[str]) -> str:
    """A tsquery that matches any of ``terms``."""
    return " | ".join(quoted(term) for term in terms)


class TsvectorIndex:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def prepare(self) -> None:
        return None

    async def add(
        self, conn: Connection, memory_id: int, owner: Owner, text: str, *, past: bool = False
    ) -> None:
        tenant_id, user_id = owner
        await conn.execute(
            _SET_TERMS, (keyed_terms(user_id, text, tenant_id, past=past), memory_id)
        )

    async def add_new(
        self, conn: Connection, owner: Owner, texts: Mapping[str, str], before: int
    ) -> None:
        tenant_id, user_id = owner
        await conn.executemany(
            "UPDATE memories SET search_terms = array_to_tsvector(CAST(? AS TEXT[]))"
            " WHERE tenant_id = ? AND user_id = ? AND content_hash = ? AND id > ?",
            [
                (keyed_terms(user_id, text, tenant_id), *owner, digest, before)
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
        """Nothing to do: the terms are a column of the memory's row (gone, or about to get
        its new terms from ``add``)."""
        return None

    async def rebuild(self, conn: Connection) -> int:
        count = 0
        async for rows in memory_batches(conn):
            await conn.executemany(
                _SET_TERMS,
                [
                    (
                        keyed_terms(
                            row["user_id"],
                            row["content"],
                            row["tenant_id"],
                            past=bool(row["superseded_by"]),
                        ),
                        row["id"],
                    )
                    for row in rows
                ],
            )
            count += len(rows)
        return count

    async def frequency(self, keyed: Sequence[str], budget: int) -> dict[str, int]:
        rows = await self._db.reader.execute_fetchall(
            _FREQUENCY_SQL, (budget + 1, list(keyed), [quoted(term) for term in keyed])
        )
        return {row["term"]: int(row["docs"]) for row in rows if row["docs"]}

    async def ranked(
        self, chosen: Sequence[str], params: dict[str, Any], where: str, narrowed: bool
    ) -> Sequence[Row]:
        return await self._db.reader.execute_fetchall(
            _search_sql(where), {**params, "query": query_expression(chosen)}
        )

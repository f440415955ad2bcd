"""The memories' search index on PostgreSQL, with nothing beyond core PostgreSQL.

Each memory's keyed terms (store/memory/index.py: the same terms SQLite indexes, each
prefixed with the user's key) are the lexemes of its ``search_terms`` tsvector, taken as
they are (``array_to_tsvector``; a text search parser would split them again, and under
the C locale it does not know CJK letters). A GIN index over that column finds a term's
memories in the user's own posting list. A query is the OR of the chosen terms, each
quoted, so nothing in it is read as tsquery syntax. A search is one statement, one round
trip: the terms' counts, the choice of the rarest and the ranking together.

The ranking has SQLite's shape (store/memory/repository.py): the ``max_ranked`` newest
matches, the best text matches and the newest of them scored, relevance divided by the best
relevance of the query (0 < relevance <= 1), recency halving every half-life. Relevance is
``ts_rank`` (how many of the query's terms a memory holds) where SQLite has bm25.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from contextd.store.engine.database import Connection, Database
from contextd.store.memory.index import (
    MEMORY_COLUMNS,
    Owner,
    TermHits,
    TermQuery,
    keyed_terms,
    memory_batches,
)

_SET_TERMS = "UPDATE memories SET search_terms = array_to_tsvector(CAST(? AS TEXT[])) WHERE id = ?"

_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in MEMORY_COLUMNS.split(","))


def _counted(budget: int) -> str:
    """The ``counted`` table of a statement given ``:terms`` (JSON pairs of a keyed term and
    its quoted form): each term with how many memories hold it, counted up to
    ``budget`` + 1 (enough to choose terms; a common term costs no more than that). The
    bound is written in, not passed: see ``_search_sql``."""
    return f"""terms AS MATERIALIZED (
    SELECT t.pair ->> 0 AS term, t.pair ->> 1 AS quoted
    FROM jsonb_array_elements(CAST(:terms AS JSONB)) AS t(pair)
),
counted AS MATERIALIZED (
    SELECT term, quoted,
           (SELECT COUNT(*) FROM (SELECT 1 FROM memories
                WHERE search_terms @@ CAST(quoted AS TSQUERY) LIMIT {int(budget) + 1}) AS found
           ) AS docs
    FROM terms
)"""


@functools.lru_cache(maxsize=64)
def _frequency_sql(budget: int) -> str:
    return f"WITH {_counted(budget)} SELECT term, docs FROM counted WHERE docs > 0"


@functools.lru_cache(maxsize=64)
def _search_sql(where: str, budget: int, most: int | None) -> str:
    """The whole search by terms for the memories that meet ``where`` (alias ``m``), in
    one statement: each term's memories counted up to a bound, the rarest terms chosen as
    ``choose_terms`` (store/memory/index.py) chooses them (a running sum of the counts,
    in the same order: count, then term by code point), then ranked. Its first column
    says how many of the terms are in some memory; a search that ranks nothing returns
    one row of it, the memory's columns null. ``where`` is checked on each match: the
    terms are a column of the memory's row, so the check costs no lookup.

    The budget and ``most`` are written into the statement, not passed: they are the
    server's (a handful of values), and a plan PostgreSQL keeps for every call must know
    its limits, or it takes the count of a term's memories (a LIMIT of unknown size) for
    a short scan of the whole table rather than a look in the index."""
    budget, most_check = int(budget), ""
    if most is not None:
        most_check = f" AND (SELECT MIN(docs) FROM ordered) <= {int(most)}"
    return f"""
WITH {_counted(budget)},
ordered AS MATERIALIZED (
    SELECT quoted, docs,
           CAST(SUM(docs) OVER (ORDER BY docs, term COLLATE "C" ROWS UNBOUNDED PRECEDING)
                AS BIGINT) AS running,
           ROW_NUMBER() OVER (ORDER BY docs, term COLLATE "C") AS n
    FROM counted
    WHERE docs > 0
),
query AS MATERIALIZED (
    SELECT CAST(string_agg(quoted, ' | ' ORDER BY n) AS TSQUERY) AS q
    FROM ordered
    WHERE (n = 1 OR running <= {budget}){most_check}
),
hits AS MATERIALIZED (
    SELECT m.id, CAST(ts_rank(m.search_terms, query.q) AS DOUBLE PRECISION) AS s
    FROM memories AS m, query
    WHERE m.search_terms @@ query.q AND {where}
    ORDER BY m.id DESC
    LIMIT {budget}
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
),
ranked AS (
    SELECT {MEMORY_COLUMNS}, relevance, recency,
           (1.0 - CAST(:weight AS DOUBLE PRECISION)) * relevance
           + CAST(:weight AS DOUBLE PRECISION) * recency AS score
    FROM scored
    WHERE tenant_id = :tenant_id AND user_id = :user_id
    ORDER BY score DESC, updated_at DESC, id DESC
    LIMIT :limit
)
SELECT (SELECT COUNT(*) FROM ordered) AS matched_terms, r.*
FROM (SELECT 1) AS one
LEFT JOIN ranked AS r ON TRUE
ORDER BY r.score DESC, r.updated_at DESC, r.id DESC
"""


def quoted(term: str) -> str:
    """A term as one tsquery lexeme, never read as tsquery syntax."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def _terms_json(keyed: Sequence[str]) -> str:
    """``:terms`` of ``_counted``: each keyed term with its quoted form."""
    return json.dumps([(term, quoted(term)) for term in keyed], ensure_ascii=False)


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
            _frequency_sql(budget), {"terms": _terms_json(keyed)}
        )
        return {row["term"]: int(row["docs"]) for row in rows}

    async def search(self, terms: TermQuery, params: dict[str, Any], where: str) -> TermHits:
        rows = await self._db.reader.execute_fetchall(
            _search_sql(where, terms.budget, terms.most),
            {**params, "terms": _terms_json(terms.keyed)},
        )
        matched = bool(rows) and int(rows[0]["matched_terms"]) > 0
        return TermHits([row for row in rows if row["id"] is not None], matched)

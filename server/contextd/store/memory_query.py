"""How a memory search asks SQLite: which of the query's terms it ranks by, the FTS5
expression that matches them, and the ranking statement.
"""

from __future__ import annotations

from collections.abc import Iterable


def match_expression(terms: Iterable[str]) -> str:
    """An FTS5 query that matches any of ``terms``, each quoted (never read as FTS5 syntax)."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def choose_terms(frequency: dict[str, int], budget: int) -> list[str]:
    """The rarest terms whose memories add up to at most ``budget`` (at least one term).

    ``frequency`` maps each term to how many memories contain it; terms absent from it (no
    memory has them) are never chosen.
    """
    chosen: list[str] = []
    total = 0
    for term, docs in sorted(frequency.items(), key=lambda item: (item[1], item[0])):
        if docs <= 0:
            continue
        if chosen and total + docs > budget:
            break
        chosen.append(term)
        total += docs
    return chosen


def search_sql(columns: str) -> str:
    """The ranking statement of a search, returning ``columns`` of the memories and then
    relevance, recency and score (the steps are in store/memories.py's docstring).

    The owner is checked on the scored candidates, outside ``scored``: a condition on
    ``memories`` inside the join makes SQLite build a Bloom filter over every row of the
    table on each search, most of a search's time (bench/README.md). Only a collision of
    two users' index keys could bring another user's row that far.
    """
    m_columns = ", ".join(f"m.{c.strip()}" for c in columns.split(","))
    return f"""
WITH hits AS MATERIALIZED (
    SELECT rowid AS id, -bm25(memories_fts) AS s
    FROM memories_fts
    WHERE memories_fts MATCH :match
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
FROM scored
WHERE tenant_id = :tenant_id AND user_id = :user_id
ORDER BY score DESC, updated_at DESC, id DESC
LIMIT :limit
"""

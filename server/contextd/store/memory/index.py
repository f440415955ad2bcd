"""The memories' search index: what MemoryRepo asks of it, and what both engines' indexes
share: each memory's terms keyed by its user, the memory columns a search returns, and
which of a query's terms a search ranks by. SQLite's index is in fts5_index.py,
PostgreSQL's in tsvector_index.py; the store's opener picks (store/open.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from contextd.core.identity import DEFAULT_TENANT
from contextd.core.search_terms import index_terms
from contextd.store.engine.database import Connection, Row
from contextd.store.models import Memory

# (tenant id, user id)
Owner = tuple[str, str]
REINDEX_BATCH = 5000


async def memory_batches(conn: Connection) -> AsyncIterator[Sequence[Row]]:
    """Every memory's id, user_id, content, tenant_id and superseded_by, in id order, a
    batch at a time: what an index is rebuilt from, in bounded memory."""
    last = 0
    while True:
        rows = await conn.execute_fetchall(
            "SELECT id, user_id, content, tenant_id, superseded_by FROM memories"
            " WHERE id > ? ORDER BY id LIMIT ?",
            (last, REINDEX_BATCH),
        )
        if not rows:
            return
        yield rows
        last = int(rows[-1]["id"])


# The columns of a memory every search returns, then relevance, recency and score.
MEMORY_COLUMNS = (
    "id, user_id, content, source_session_id, source_message_id, created_at, updated_at,"
    " tenant_id, agent, app, metadata, valid_from, valid_to, expires_at, superseded_by"
)


def memory_from_row(row: Row) -> Memory:
    """The memory in a row that holds ``MEMORY_COLUMNS``."""
    metadata = row["metadata"]
    return Memory(
        id=row["id"],
        user_id=row["user_id"],
        content=row["content"],
        source_session_id=row["source_session_id"],
        source_message_id=row["source_message_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        tenant_id=row["tenant_id"],
        agent=row["agent"],
        app=row["app"],
        metadata={} if metadata == "{}" else json.loads(metadata),
        valid_from=row["valid_from"],
        valid_to=row["valid_to"],
        expires_at=row["expires_at"],
        superseded_by=row["superseded_by"],
    )


def user_key(user_id: str, tenant_id: str = DEFAULT_TENANT, *, past: bool = False) -> str:
    """The 16 hex digits that prefix every index term of the user's memories.

    The default tenant's keys are those of the index before tenants existed (no rebuild);
    another tenant's are a hash keyed by the tenant, so the same user id in two tenants
    has two keys. Searches also filter on the tenant: a key collision could cost time,
    never show another user's memory. ``past``: the key of the user's superseded memories,
    another hash, so that a search of what is true now never reads their terms.
    """
    data = user_id.encode("utf-8")
    person = b"past" if past else b""
    if tenant_id == DEFAULT_TENANT:
        return hashlib.blake2b(data, digest_size=8, person=person).hexdigest()
    tenant = hashlib.blake2b(tenant_id.encode("utf-8"), digest_size=32).digest()
    return hashlib.blake2b(data, digest_size=8, key=tenant, person=person).hexdigest()


def keyed_terms(
    user_id: str, content: str, tenant_id: str = DEFAULT_TENANT, *, past: bool = False
) -> list[str]:
    """A memory's index terms, each prefixed with its user's key (the past key for a
    superseded memory)."""
    key = user_key(user_id, tenant_id, past=past)
    return [key + term for term in index_terms(content)]


@dataclass(frozen=True, slots=True)
class TermQuery:
    """What a search by terms asks an index for: its keyed terms, the budget of matches
    ``choose_terms`` picks rare terms within (also the most matches ranked), ``most``:
    nothing when even the rarest term is in more memories than that (None: no bound),
    and ``narrowed``: ``where`` leaves out many memories, so it is checked on every
    match before ranking, not only on the results."""

    keyed: Sequence[str]
    budget: int
    most: int | None = None
    narrowed: bool = False


@dataclass(frozen=True, slots=True)
class TermHits:
    """A search's ranked rows, and whether any of its terms is in any memory at all."""

    rows: Sequence[Row]
    matched: bool


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


class MemoryIndex(Protocol):
    """Index entries follow the memories inside the caller's write transaction."""

    async def prepare(self) -> None:
        """Once, before the first search."""

    async def add(
        self, conn: Connection, memory_id: int, owner: Owner, text: str, *, past: bool = False
    ) -> None:
        """Index a memory just inserted (or whose text just changed, after ``remove``);
        ``past``: a superseded memory, under the owner's past key."""

    async def add_new(
        self, conn: Connection, owner: Owner, texts: Mapping[str, str], before: int
    ) -> None:
        """Index the owner's memories of these content hashes (-> text) with ids above
        ``before``: those a bulk insert just made."""

    async def remove(
        self,
        conn: Connection,
        owner: Owner,
        rows: Sequence[tuple[int, str]],
        *,
        past: bool = False,
    ) -> None:
        """Forget the entries of these (id, content) memories of the owner (superseded
        ones: ``past``)."""

    async def rebuild(self, conn: Connection) -> int:
        """Index every memory again; how many there are."""

    async def frequency(self, keyed: Sequence[str], budget: int) -> dict[str, int]:
        """How many memories hold each of these keyed terms (absent: none); a count
        above ``budget`` may be given as any number above it."""

    async def search(self, terms: TermQuery, params: dict[str, Any], where: str) -> TermHits:
        """The ranking statement's rows (repository.py) for the terms ``choose_terms``
        picks among ``terms``, of the memories that meet ``where``
        (store/memory/filters.py, on alias ``m``; its parameters are in ``params``, with
        the ranking's own)."""

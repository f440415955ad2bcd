"""A memory's versions: how its text, scope, metadata, validity and expiry change, inside
the caller's write transaction (MemoryRepo.rewrite and MemoryRepo.edit).

A memory's id names the fact as it is now, so hosts' ids stay valid when it changes. When
a new value *supersedes* the old one (a fact that changed in the world: "I moved to
Porto"), the old text is kept as a memory of its own, a copy of the memory as it was
(its vector too), true until the change and ``superseded_by`` the memory. When the new
text was already another memory of the user, the replaced memory itself becomes the
superseded one (a merge). A *correction* changes the text in place and keeps the old
wording in the memory history only.

Superseded memories are indexed under their user's past key (store/memory/index.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from contextd.core.search_terms import content_hash
from contextd.store.engine.database import Connection
from contextd.store.memory.index import MEMORY_COLUMNS, MemoryIndex, Owner, memory_from_row
from contextd.store.models import Memory


class MemoryConflict(Exception):
    """The change would give the user two memories of the same text and scope, both
    without an end; ``other_id`` is the one already there."""

    def __init__(self, other_id: int) -> None:
        super().__init__(f"memory {other_id} already says this")
        self.other_id = other_id


class MemorySuperseded(Exception):
    """A superseded memory is a fact of the past: it is not changed (its successor is)."""

    def __init__(self, by_id: int) -> None:
        super().__init__(f"the memory was superseded by memory {by_id}")
        self.by_id = by_id


@dataclass(frozen=True, slots=True)
class MemoryDetails:
    """What a memory holds beyond its text and source: scope, metadata, validity, expiry
    (None: none; ``valid_from`` None: the time it is stored)."""

    agent: str = ""
    app: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    valid_from: float | None = None
    valid_to: float | None = None
    expires_at: float | None = None


# A memory of no scope, metadata, end or expiry, true from when it is stored.
PLAIN = MemoryDetails()


@dataclass(frozen=True, slots=True)
class MemoryEdit:
    """The fields ``changes`` names take the values here (None: cleared); ``supersede``
    with a new content keeps the old text as a superseded memory (see the module doc)."""

    changes: frozenset[str]
    content: str = ""
    details: MemoryDetails = PLAIN
    supersede: bool = False


@dataclass(frozen=True, slots=True)
class Change:
    """What a rewrite or an edit did: the memory as it was, the memory that now holds the
    text, ``action`` ("update": the text changed, "merge": the old memory is superseded by
    ``memory``, which already said it; "": no change of text) and ``replaced_id``, the
    memory that keeps the old text as a superseded fact (0: none)."""

    old: Memory
    memory: Memory
    action: str
    replaced_id: int = 0


def metadata_json(metadata: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(metadata.items())), ensure_ascii=False, separators=(",", ":"))


async def write_metadata(
    conn: Connection, memory_id: int, owner: Owner, metadata: Mapping[str, str]
) -> None:
    """The memory's rows of ``memory_metadata``: exactly these pairs."""
    await conn.execute("DELETE FROM memory_metadata WHERE memory_id = ?", (memory_id,))
    if metadata:
        await conn.executemany(
            "INSERT INTO memory_metadata (memory_id, tenant_id, user_id, key, value)"
            " VALUES (?, ?, ?, ?, ?)",
            [(memory_id, *owner, key, value) for key, value in metadata.items()],
        )


async def current_row(conn: Connection, memory_id: int, owner: Owner) -> Memory | None:
    rows = await conn.execute_fetchall(
        f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ? AND tenant_id = ? AND user_id = ?",
        (memory_id, *owner),
    )
    return memory_from_row(rows[0]) if rows else None


async def same_text(
    conn: Connection, owner: Owner, agent: str, app: str, digest: str, but: int
) -> int:
    """The id of the owner's memory without an end of this text hash and scope, other
    than ``but`` (0: none)."""
    rows = await conn.execute_fetchall(
        "SELECT id FROM memories WHERE tenant_id = ? AND user_id = ? AND agent = ? AND app = ?"
        " AND content_hash = ? AND valid_to IS NULL AND id <> ?",
        (*owner, agent, app, digest, but),
    )
    return int(rows[0]["id"]) if rows else 0


async def touch(conn: Connection, memory_id: int, ts: float) -> Memory:
    """Refresh the memory's ``updated_at`` (stated again, it is current)."""
    rows = await conn.execute_fetchall(
        "UPDATE memories SET updated_at = max(updated_at, ?)"
        f" WHERE id = ? RETURNING {MEMORY_COLUMNS}",
        (ts, memory_id),
    )
    return memory_from_row(rows[0])


async def keep_as_past(conn: Connection, index: MemoryIndex, old: Memory, until: float) -> int:
    """A superseded copy of ``old`` as it is stored now (its vector and metadata too),
    true until ``until``; its id."""
    rows = await conn.execute_fetchall(
        "INSERT INTO memories (tenant_id, user_id, content, content_hash, source_session_id,"
        " source_message_id, created_at, updated_at, embedding, embedding_model,"
        " embedding_dims, embedded_at, agent, app, metadata, valid_from, valid_to, expires_at,"
        " superseded_by)"
        " SELECT tenant_id, user_id, content, content_hash, source_session_id,"
        " source_message_id, created_at, updated_at, embedding, embedding_model,"
        " embedding_dims, embedded_at, agent, app, metadata, valid_from, ?, expires_at, id"
        " FROM memories WHERE id = ? RETURNING id",
        (until, old.id),
    )
    copy = int(rows[0]["id"])
    owner = (old.tenant_id, old.user_id)
    await write_metadata(conn, copy, owner, old.metadata)
    await index.add(conn, copy, owner, old.content, past=True)
    return copy


async def mark_superseded(
    conn: Connection, index: MemoryIndex, old: Memory, by_id: int, until: float
) -> None:
    """``old`` becomes a fact of the past, superseded by ``by_id`` (a merge)."""
    await conn.execute(
        "UPDATE memories SET superseded_by = ?, valid_to = ? WHERE id = ?", (by_id, until, old.id)
    )
    owner = (old.tenant_id, old.user_id)
    await index.remove(conn, owner, [(old.id, old.content)])
    await index.add(conn, old.id, owner, old.content, past=True)


async def rewrite(
    conn: Connection,
    index: MemoryIndex,
    old: Memory,
    new_content: str,
    source: tuple[str, int],
    ts: float,
) -> Change:
    """Give the current memory ``old`` a new value ``new_content`` (after a turn): the old
    text is superseded (see the module doc); the same text in other words only refreshes
    it. The new text's provenance is ``source`` (session id, message id)."""
    digest = content_hash(new_content)
    if content_hash(old.content) == digest:
        return Change(old, await touch(conn, old.id, ts), "")
    owner = (old.tenant_id, old.user_id)
    other = await same_text(conn, owner, old.agent, old.app, digest, old.id)
    if other:
        await mark_superseded(conn, index, old, other, ts)
        return Change(old, await touch(conn, other, ts), "merge", old.id)
    replaced = await keep_as_past(conn, index, old, ts)
    memory = await _set_text(conn, index, old, new_content, source, ts, valid_from=ts)
    return Change(old, memory, "update", replaced)


async def _set_text(
    conn: Connection,
    index: MemoryIndex,
    old: Memory,
    text: str,
    source: tuple[str, int],
    ts: float,
    *,
    valid_from: float | None,
) -> Memory:
    rows = await conn.execute_fetchall(
        "UPDATE memories SET content = ?, content_hash = ?, source_session_id = ?,"
        " source_message_id = ?, updated_at = max(updated_at, ?), valid_from = ?,"
        " embedding = NULL, embedding_model = '', embedding_dims = 0"  # the old text's
        f" WHERE id = ? RETURNING {MEMORY_COLUMNS}",
        (text, content_hash(text), *source, ts, valid_from, old.id),
    )
    owner = (old.tenant_id, old.user_id)
    await index.remove(conn, owner, [(old.id, old.content)])
    await index.add(conn, old.id, owner, text)
    return memory_from_row(rows[0])


async def edit(
    conn: Connection, index: MemoryIndex, old: Memory, change: MemoryEdit, ts: float
) -> Change:
    """Apply a host's change to the owner's memory ``old`` (read in this transaction).

    Raises MemorySuperseded for a superseded memory, MemoryConflict when the memory would
    say what another of the user's memories without an end says, in the same scope.
    """
    if old.superseded_by:
        raise MemorySuperseded(old.superseded_by)
    named, d = change.changes, change.details
    text = change.content if "content" in named else old.content
    agent, app = (d.agent, d.app) if "scope" in named else (old.agent, old.app)
    valid_to = d.valid_to if "valid_to" in named else old.valid_to
    if valid_to is None:
        other = await same_text(
            conn, (old.tenant_id, old.user_id), agent, app, content_hash(text), old.id
        )
        if other:
            raise MemoryConflict(other)
    new_text = content_hash(text) != content_hash(old.content) or text != old.content
    valid_from = d.valid_from if "valid_from" in named else old.valid_from
    replaced = 0
    if new_text and change.supersede:
        starts = ts if "valid_from" not in named or d.valid_from is None else d.valid_from
        replaced = await keep_as_past(conn, index, old, starts)
        valid_from = starts
    memory = old
    if new_text:
        source = (old.source_session_id, old.source_message_id)
        memory = await _set_text(conn, index, old, text, source, ts, valid_from=valid_from)
    owner = (old.tenant_id, old.user_id)
    if "metadata" in named:
        await write_metadata(conn, old.id, owner, d.metadata)
    rows = await conn.execute_fetchall(
        "UPDATE memories SET agent = ?, app = ?, metadata = ?, valid_from = ?, valid_to = ?,"
        " expires_at = ?, updated_at = max(updated_at, ?)"
        f" WHERE id = ? RETURNING {MEMORY_COLUMNS}",
        (
            agent,
            app,
            metadata_json(d.metadata if "metadata" in named else memory.metadata),
            valid_from,
            valid_to,
            d.expires_at if "expires_at" in named else old.expires_at,
            ts,
            old.id,
        ),
    )
    return Change(old, memory_from_row(rows[0]), "update" if new_text else "", replaced)

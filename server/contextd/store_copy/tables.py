"""Copying the database's tables from one engine to the other (``contextd store copy``).

Every table is walked in key order, a batch at a time, on the source; each batch is looked
up on the target by key. A row the target does not have is inserted with its key as it is
(ids stay valid for the hosts that keep them); a row it has with the same values is left
alone, so a second copy writes nothing; a row it has with other values stops the copy
(CopyConflict), since which one is right is not for the copy to guess. The caller runs
every table in one target transaction: a stopped copy leaves the target as it was.

Left out, because each engine makes them itself: the search index of the memories (added
here through the target's own index), SQLite's FTS5 tables and the sessions' ``rowid``
(the target numbers sessions in the source's order), PostgreSQL's event log tables
(copied as event logs, store_copy/logs.py), the memories' vectors (derived from their
text, like the index: the target's server embeds the copied memories again), and
the marks of what a process may keep in memory, the sessions' ``version`` and
``cache_versions`` (a server on the target starts with nothing kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contextd.store.engine.database import Connection, Database, Row
from contextd.store.memory.index import MemoryIndex

BATCH = 500
# Columns left out on purpose (see the module doc): the target makes them again.
LEFT_OUT: dict[str, frozenset[str]] = {
    "memories": frozenset({"embedding", "embedding_model", "embedding_dims", "embedded_at"}),
    "sessions": frozenset({"version"}),
}
# A row's values, in the order of Table.columns.
Values = tuple[Any, ...]


class CopyConflict(RuntimeError):
    """The target holds a row under a key of the source with other values."""


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    key: tuple[str, ...]
    columns: tuple[str, ...]  # every column both engines have, the key's first
    # The columns the walk pages on (the key unless told): sessions go in rowid order,
    # the order the retention purge walks them in.
    walk: tuple[str, ...] = ()
    # The column of ids a counter gives out (SQLite AUTOINCREMENT, a PostgreSQL identity).
    counter: str = ""

    @property
    def paged_on(self) -> tuple[str, ...]:
        return self.walk or self.key


# In an order that meets every foreign key: a row's parent is copied first.
TABLES = (
    Table(
        "sessions",
        ("id",),
        (
            "id",
            "tenant_id",
            "user_id",
            "scenario",
            "host",
            "title",
            "metadata",
            "created_at",
            "updated_at",
            "message_count",
            "prompt_tokens",
            "completion_tokens",
            "prompt_tokens_estimate",
            "cache_read_tokens",
            "cache_write_tokens",
            "estimated_turns",
        ),
        walk=("rowid",),
    ),
    Table(
        "conversation",
        ("id",),
        (
            "id",
            "tenant_id",
            "session_id",
            "user_id",
            "seq",
            "role",
            "content",
            "tool_calls",
            "tool_call_id",
            "turn_index",
            "is_collected",
            "status",
            "created_at",
            "updated_at",
            "parts",
        ),
        counter="id",
    ),
    Table("message_tokens", ("message_id", "tokenizer"), ("message_id", "tokenizer", "tokens")),
    Table(
        "answer_records",
        ("message_id",),
        (
            "message_id",
            "model",
            "prompt_tokens",
            "completion_tokens",
            "prompt_tokens_estimate",
            "cache_read_tokens",
            "cache_write_tokens",
            "estimated",
            "note",
        ),
    ),
    Table(
        "compression_summaries",
        ("id",),
        ("id", "session_id", "message_ids", "start_message_id", "summary", "active", "created_at"),
        counter="id",
    ),
    Table(
        "session_summaries",
        ("session_id",),
        (
            "session_id",
            "tenant_id",
            "user_id",
            "summary",
            "updated_at",
            "set_by_host",
            "turn_index",
        ),
    ),
    Table(
        "partial_answers",
        ("session_id",),
        (
            "session_id",
            "tenant_id",
            "turn_index",
            "step",
            "text",
            "tokenizer",
            "prompt_tokens",
            "completion_tokens",
            "prompt_tokens_estimate",
            "cache_read_tokens",
            "cache_write_tokens",
            "usage_estimated",
            "started_at",
            "updated_at",
            "owner",  # a stopped server's: the row is a turn its end cut off
        ),
    ),
    Table(
        "prompt_templates",
        ("tenant_id", "scenario"),
        ("tenant_id", "scenario", "system_prompt", "version", "enabled", "updated_at"),
    ),
    Table(
        "skills",
        ("tenant_id", "name"),
        ("tenant_id", "name", "description", "prompt", "apps", "enabled", "updated_at"),
    ),
    Table(
        "memories",
        ("id",),
        (
            "id",
            "tenant_id",
            "user_id",
            "content",
            "content_hash",
            "source_session_id",
            "source_message_id",
            "created_at",
            "updated_at",
            "agent",
            "app",
            "metadata",
            "valid_from",
            "valid_to",
            "expires_at",
            "superseded_by",
        ),
        counter="id",
    ),
    Table(
        "memory_metadata",
        ("memory_id", "key"),
        ("memory_id", "key", "tenant_id", "user_id", "value"),
    ),
    Table(
        "memory_history",
        ("id",),
        (
            "id",
            "tenant_id",
            "memory_id",
            "user_id",
            "action",
            "old_content",
            "new_content",
            "replaced_memory_id",
            "method",
            "source_session_id",
            "source_message_id",
            "changed_at",
        ),
        counter="id",
    ),
    Table(
        "api_keys",
        ("id",),
        (
            "id",
            "secret_hash",
            "name",
            "user_id",
            "tenant_id",
            "service",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
        ),
    ),
    # The key of the ids callers see: copied, so that the ids hosts keep stay valid; a
    # target whose server made a key of its own conflicts rather than change them.
    Table("server_secrets", ("name",), ("name", "value", "created_at")),
)


@dataclass(slots=True)
class TableCount:
    """Rows of one table: in the source, inserted by this copy, found already there, and
    in the target before and after."""

    name: str
    source: int = 0
    copied: int = 0
    present: int = 0
    target_before: int = 0
    target: int = 0

    @property
    def matches(self) -> bool:
        return (
            self.copied + self.present == self.source
            and self.target == self.target_before + self.copied
        )


def _key_text(table: Table, row: Values) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in zip(table.key, row, strict=False))


def _where_keys(table: Table, count: int) -> str:
    """A condition matching ``count`` keys given as parameters, one key after the other."""
    if len(table.key) == 1:
        return f"{table.key[0]} IN ({', '.join('?' * count)})"
    one = "(" + " AND ".join(f"{column} = ?" for column in table.key) + ")"
    return " OR ".join([one] * count)


def _values(table: Table, row: Row) -> Values:
    """A row's values in the order of ``table.columns``, read by name."""
    return tuple(row[column] for column in table.columns)


async def count_rows(conn: Connection, table: str) -> int:
    rows = await conn.execute_fetchall(f"SELECT COUNT(*) AS row_count FROM {table}")
    return int(rows[0]["row_count"])


async def copy_table(
    source: Database,
    target: Connection,
    table: Table,
    index: MemoryIndex | None = None,
) -> TableCount:
    """Copy the rows of ``table`` the target lacks, in batches; the memories' index entries
    follow through ``index``."""
    count = TableCount(table.name, target_before=await count_rows(target, table.name))
    columns = ", ".join(table.columns)
    # The paged-on columns say where the next batch starts.
    select = ", ".join((*table.columns, *(c for c in table.paged_on if c not in table.columns)))
    order = ", ".join(table.paged_on)
    after = f" WHERE ({order}) > ({', '.join('?' * len(table.paged_on))})"
    insert = f"INSERT INTO {table.name} ({columns}) VALUES ({', '.join('?' * len(table.columns))})"
    last: Values = ()
    while True:
        rows = await source.reader.execute_fetchall(
            f"SELECT {select} FROM {table.name}{after if last else ''} ORDER BY {order} LIMIT ?",
            (*last, BATCH),
        )
        if not rows:
            break
        last = tuple(rows[-1][column] for column in table.paged_on)
        values = [_values(table, row) for row in rows]
        new = await _missing(target, table, values)
        count.source += len(values)
        count.present += len(values) - len(new)
        if new:
            await target.executemany(insert, new)
            if index is not None:
                await _index_memories(target, index, table, new)
            count.copied += len(new)
    count.target = await count_rows(target, table.name)
    return count


async def _missing(target: Connection, table: Table, values: list[Values]) -> list[Values]:
    """The rows the target lacks; CopyConflict for one it holds with other values."""
    keys = len(table.key)  # the first values of a row
    held = await target.execute_fetchall(
        f"SELECT {', '.join(table.columns)} FROM {table.name}"
        f" WHERE {_where_keys(table, len(values))}",
        [part for row in values for part in row[:keys]],
    )
    found = {there[:keys]: there for there in (_values(table, row) for row in held)}
    new = []
    for row in values:
        there = found.get(row[:keys])
        if there is None:
            new.append(row)
        elif there != row:
            raise CopyConflict(
                f"the target's {table.name} row {_key_text(table, row)} differs from the "
                "source's: nothing was copied (remove or fix that row in the target, or "
                "copy into an empty one)"
            )
    return new


async def _index_memories(
    target: Connection, index: MemoryIndex, table: Table, rows: list[Values]
) -> None:
    names = ("id", "tenant_id", "user_id", "content", "superseded_by")
    at = {name: table.columns.index(name) for name in names}
    for row in rows:
        owner = (str(row[at["tenant_id"]]), str(row[at["user_id"]]))
        await index.add(
            target,
            int(row[at["id"]]),
            owner,
            str(row[at["content"]]),
            past=bool(row[at["superseded_by"]]),
        )


async def fix_session_counts(source: Database, target: Connection) -> None:
    """Put back the copied sessions' message count and last change: inserting their
    messages counted each again (the conversation's insert trigger)."""
    last = None
    while True:
        where = "" if last is None else " WHERE rowid > ?"
        rows = await source.reader.execute_fetchall(
            f"SELECT id, message_count, updated_at, rowid FROM sessions{where}"
            " ORDER BY rowid LIMIT ?",
            (*(() if last is None else (last,)), BATCH),
        )
        if not rows:
            return
        await target.executemany(
            "UPDATE sessions SET message_count = ?, updated_at = ? WHERE id = ?",
            [(row["message_count"], row["updated_at"], row["id"]) for row in rows],
        )
        last = rows[-1]["rowid"]


async def counter_high_water(db: Database, conn: Connection, table: Table) -> int:
    """The highest id the table's counter gave out, or a row holds (ids are never given
    twice: on SQLite the counter also stays above ids deleted since)."""
    rows = await conn.execute_fetchall(
        f"SELECT COALESCE(MAX({table.counter}), 0) AS highest FROM {table.name}"
    )
    return max(int(rows[0]["highest"]), await db.id_counter(conn, table.name, table.counter))


async def raise_counter(db: Database, conn: Connection, table: Table, at_least: int) -> None:
    """Make the target's counter give ids above ``at_least`` and above every id the table
    holds (the copied ones were inserted as they were, not given by the counter)."""
    wanted = await counter_high_water(db, conn, table)
    wanted = max(wanted, at_least)
    if wanted > await db.id_counter(conn, table.name, table.counter):
        await db.set_id_counter(conn, table.name, table.counter, wanted)

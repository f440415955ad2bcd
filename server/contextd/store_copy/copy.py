"""``contextd store copy``: everything one database holds, copied into another of either
engine, with its event logs. Tables first, in one target transaction (store_copy/tables.py),
then the event logs (store_copy/logs.py), then each count is checked."""

from __future__ import annotations

from contextd.store.memory.repository import MemoryRepo
from contextd.store.open import Store
from contextd.store_copy.logs import copy_logs
from contextd.store_copy.tables import (
    TABLES,
    TableCount,
    copy_table,
    counter_high_water,
    fix_session_counts,
    raise_counter,
)


async def copy_store(source_store: Store, target_store: Store) -> list[TableCount]:
    """Copy what the target lacks; the counts of every table and of the event log lines.

    Raises CopyConflict when the target holds a key of the source with other values.
    """
    source, target = source_store.db, target_store.db
    memories = MemoryRepo(target, target_store.memory_index)
    # The target's index is brought to the current terms first: copied memories get
    # entries of the current terms.
    await memories.ensure_index()
    counts = []
    async with target.transaction() as conn:
        for table in TABLES:
            index = memories.index if table.name == "memories" else None
            count = await copy_table(source, conn, table, index)
            counts.append(count)
            if table.name == "conversation" and count.copied:
                await fix_session_counts(source, conn)
        for table in TABLES:
            if table.counter:
                given = await counter_high_water(source, source.reader, table)
                await raise_counter(target, conn, table, given)
    counts.append(
        await copy_logs(source, source_store.event_lines, target, target_store.event_lines)
    )
    return counts

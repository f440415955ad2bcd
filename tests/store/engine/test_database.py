"""What every engine does alike: a transaction-scoped lock orders the transactions that take
it, in any process."""

from __future__ import annotations

import asyncio

from contextd.store.engine.database import Database


async def test_the_transaction_lock_orders_transactions(db: Database) -> None:
    order: list[str] = []
    held = asyncio.Event()

    async def first() -> None:
        async with db.transaction() as conn:
            await db.lock_in_transaction(conn, "k", "1")
            held.set()
            order.append("first in")
            await asyncio.sleep(0.3)
            order.append("first out")

    async def second() -> None:
        await held.wait()
        async with db.transaction() as conn:
            await db.lock_in_transaction(conn, "k", "1")
            order.append("second in")

    async def other_key() -> None:
        await held.wait()
        async with db.transaction() as conn:
            await db.lock_in_transaction(conn, "k", "2")
            order.append("other key")

    tasks = [second(), first()]
    if db.engine == "postgresql":  # SQLite's writes never run at once anyway
        tasks.append(other_key())
    await asyncio.gather(*tasks)
    assert order.index("second in") > order.index("first out")
    if "other key" in order:
        assert order.index("other key") < order.index("first out")

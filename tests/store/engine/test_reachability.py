"""The database watch: told of a database out of reach once, it probes until the
database answers, then says so; closing it stops the probing."""

from __future__ import annotations

import asyncio

from contextd.store.engine.reachability import DatabaseWatch


async def test_it_probes_until_the_database_answers() -> None:
    answers = [False, False, True]
    probes = 0

    async def probe() -> None:
        nonlocal probes
        probes += 1
        if not answers.pop(0):
            raise OSError("refused")

    watch = DatabaseWatch(probe, interval=0.01)
    told: list[bool] = []
    watch.listeners.append(told.append)
    watch.lost()
    watch.lost()  # told once, probed by one task
    assert watch.unreachable and told == [False]
    for _ in range(200):
        if not watch.unreachable:
            break
        await asyncio.sleep(0.01)
    assert told == [False, True] and probes == 3
    await watch.aclose()


async def test_closing_stops_the_probe() -> None:
    async def probe() -> None:
        raise OSError("refused")

    watch = DatabaseWatch(probe, interval=0.01)
    watch.lost()
    await asyncio.sleep(0.05)
    await watch.aclose()
    assert watch.unreachable

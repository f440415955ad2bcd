"""Health follows every watcher: NOT_SERVING while any says its part fails (the disk
is full, the database is out of reach), SERVING only once none does, for the overall
status and every service name."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from contextd.fronts.grpc.serving_health import NOT_SERVING, SERVING, ServingHealth
from grpc_health.v1 import _async as health_aio
from grpc_health.v1 import health_pb2

NAMES = ("a.Service", "b.Service")


async def _statuses(servicer: health_aio.HealthServicer) -> set[int]:
    await asyncio.sleep(0.01)  # the changes are applied by a task
    found = set()
    for name in ("", *NAMES):
        reply = await servicer.Check(health_pb2.HealthCheckRequest(service=name), None)
        found.add(int(reply.status))
    return found


def _watcher(serving: ServingHealth, what: str) -> Callable[[bool], None]:
    listeners: list[Callable[[bool], None]] = []
    serving.follow(what, listeners, recovered=f"{what} ok", failed=f"{what} failed", extra={})
    [listener] = listeners
    return listener


async def test_not_serving_while_either_watcher_says_so() -> None:
    servicer = health_aio.HealthServicer()
    serving = ServingHealth(servicer, NAMES)
    disk = _watcher(serving, "disk")
    database = _watcher(serving, "database")
    await serving.start()
    assert await _statuses(servicer) == {SERVING}
    disk(False)
    database(False)
    assert await _statuses(servicer) == {NOT_SERVING}
    disk(True)
    assert await _statuses(servicer) == {NOT_SERVING}  # the database is still away
    database(True)
    assert await _statuses(servicer) == {SERVING}
    await serving.aclose()


async def test_a_failure_before_start_is_published_at_start() -> None:
    servicer = health_aio.HealthServicer()
    serving = ServingHealth(servicer, NAMES)
    database = _watcher(serving, "database")
    database(False)
    await serving.start()
    assert await _statuses(servicer) == {NOT_SERVING}
    database(True)
    assert await _statuses(servicer) == {SERVING}
    await serving.aclose()

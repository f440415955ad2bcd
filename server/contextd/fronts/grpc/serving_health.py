"""The health status of every service (the overall "" and each service name), from the
watchers of what the server needs: NOT_SERVING while any of them says it fails (the
disk is full, the database is out of reach), SERVING once none does."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import TypeAlias

from grpc_health.v1 import _async as health_aio  # health.aio re-exports this module
from grpc_health.v1 import health_pb2

log = logging.getLogger("contextd.server")

Status: TypeAlias = health_pb2.HealthCheckResponse.ServingStatus.ValueType
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class ServingHealth:
    def __init__(self, servicer: health_aio.HealthServicer, names: Sequence[str]) -> None:
        self._servicer = servicer
        self._names = ("", *names)
        self._failing: set[str] = set()
        self._started = False
        # Status changes in the order they happened, one at a time.
        self._changes: asyncio.Queue[Status] = asyncio.Queue()
        self._applier: asyncio.Task[None] | None = None

    def follow(
        self,
        what: str,
        listeners: list[Callable[[bool], None]],
        *,
        recovered: str,
        failed: str,
        extra: dict[str, object],
    ) -> None:
        """Follow a watcher that calls its ``listeners`` with True (``what`` works
        again, logged as ``recovered``) or False (it fails, logged as ``failed``)."""

        def changed(ok: bool) -> None:
            if ok:
                log.info(recovered, extra=extra)
                self._failing.discard(what)
            else:
                log.warning(failed, extra=extra)
                self._failing.add(what)
            if self._started:
                self._changes.put_nowait(self._status())

        listeners.append(changed)

    async def start(self) -> None:
        """Publish the status (SERVING unless a watcher already said otherwise) and
        follow the watchers from now on."""
        self._started = True
        await self._set_all(self._status())
        self._applier = asyncio.get_running_loop().create_task(self._apply())

    async def aclose(self) -> None:
        if self._applier is not None:
            self._applier.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._applier

    def _status(self) -> Status:
        return NOT_SERVING if self._failing else SERVING

    async def _apply(self) -> None:
        while True:
            await self._set_all(await self._changes.get())

    async def _set_all(self, status: Status) -> None:
        for name in self._names:
            await self._servicer.set(name, status)

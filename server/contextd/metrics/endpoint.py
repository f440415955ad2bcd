"""``GET /metrics`` on a port of its own, and what is measured there rather than on a
call's path: the event loop's lag, and figures read from the database when scraped."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Gauge, Histogram, generate_latest

from contextd.metrics.across import Across, snapshot
from contextd.metrics.prometheus import PrometheusRecorder

log = logging.getLogger("contextd.metrics")

PATH = "/metrics"
_LAG = "contextd_event_loop_lag_seconds"
_SIZE = "contextd_database_size_bytes"
# How often the lag probe hands the loop a callback; short enough to see a stall of a second.
LAG_INTERVAL_S = 0.25


class MetricsEndpoint:
    """Serve the recorder's registry; ``database_size`` is awaited at each scrape."""

    def __init__(
        self, recorder: PrometheusRecorder, database_size: Callable[[], Awaitable[int]]
    ) -> None:
        self._recorder = recorder
        self._database_size = database_size
        recorder.across[_SIZE] = Across.SAME  # each worker reads the one database
        self._size = Gauge(
            _SIZE,
            "Size of the database: the SQLite file and its write-ahead log, or "
            "pg_database_size on PostgreSQL; read at each scrape.",
            registry=recorder.registry,
        )
        recorder.across[_LAG] = Across.EACH  # a stalled worker shows as itself
        self._lag = Histogram(
            _LAG,
            "How long a callback handed to the event loop waited to run.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=recorder.registry,
        )
        app = web.Application()
        app.router.add_get(PATH, self._scrape)
        self._runner = web.AppRunner(app, access_log=None)
        self._probe: LagProbe | None = None
        self._private = False

    async def start(self, host: str, port: int) -> int:
        """Listen and start the lag probe; return the bound port."""
        site = await self._listen(
            lambda: web.TCPSite(self._runner, host or None, port, reuse_address=True),
            f"{host}:{port}",
        )
        server = site._server
        assert isinstance(server, asyncio.Server)
        return int(server.sockets[0].getsockname()[1])

    async def start_private(self, path: str) -> None:
        """A worker's: answer its parent's gatherer on the Unix socket ``path`` with a
        snapshot of its figures (across.py) rather than the text format."""
        self._private = True
        await self._listen(lambda: web.UnixSite(self._runner, path), path)

    async def _listen(self, site: Callable[[], web.BaseSite], where: str) -> web.BaseSite:
        await self._runner.setup()
        made = site()
        try:
            await made.start()
        except OSError as error:
            await self._runner.cleanup()
            raise SystemExit(f"cannot listen for metrics on {where}: {error}") from None
        self._probe = LagProbe(asyncio.get_running_loop(), self._lag)
        return made

    async def aclose(self) -> None:
        if self._probe is not None:
            self._probe.stop()
        await self._runner.cleanup()

    async def _scrape(self, request: web.Request) -> web.Response:
        try:
            self._size.set(await self._database_size())
        except Exception:  # the other metrics still answer; the gauge keeps its last value
            log.warning("database size unknown", exc_info=True)
        if self._private:
            across = self._recorder.across
            body = snapshot(self._recorder.registry, across, os.getpid())
            return web.Response(body=body, content_type="application/json")
        body = generate_latest(self._recorder.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


class LagProbe:
    """Every ``LAG_INTERVAL_S``, a thread of its own hands the loop a callback that
    observes how long it waited to run. From a thread rather than a timer on the loop:
    a timer always pending makes the loop compute a timeout at each of its iterations,
    several per call."""

    def __init__(self, loop: asyncio.AbstractEventLoop, lag: Histogram) -> None:
        self._loop = loop
        self._lag = lag
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="contextd-lag-probe", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(LAG_INTERVAL_S):
            try:
                self._loop.call_soon_threadsafe(self._ran, time.perf_counter())
            except RuntimeError:  # the loop closed before ``stop``
                return

    def _ran(self, handed: float) -> None:
        self._lag.observe(time.perf_counter() - handed)

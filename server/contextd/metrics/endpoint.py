"""``GET /metrics`` on a port of its own, and what is measured there rather than on a
call's path: the event loop's lag, and figures read from the database when scraped."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Gauge, Histogram, generate_latest

from contextd.metrics.prometheus import PrometheusRecorder

log = logging.getLogger("contextd.metrics")

PATH = "/metrics"
# How often the lag probe hands the loop a callback; short enough to see a stall of a second.
LAG_INTERVAL_S = 0.25


class MetricsEndpoint:
    """Serve the recorder's registry; ``database_size`` is awaited at each scrape."""

    def __init__(
        self, recorder: PrometheusRecorder, database_size: Callable[[], Awaitable[int]]
    ) -> None:
        self._recorder = recorder
        self._database_size = database_size
        self._size = Gauge(
            "contextd_database_size_bytes",
            "Size of the database: the SQLite file and its write-ahead log, or "
            "pg_database_size on PostgreSQL; read at each scrape.",
            registry=recorder.registry,
        )
        self._lag = Histogram(
            "contextd_event_loop_lag_seconds",
            "How long a callback handed to the event loop waited to run.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=recorder.registry,
        )
        app = web.Application()
        app.router.add_get(PATH, self._scrape)
        self._runner = web.AppRunner(app, access_log=None)
        self._probe: LagProbe | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen and start the lag probe; return the bound port."""
        await self._runner.setup()
        site = web.TCPSite(self._runner, host or None, port, reuse_address=True)
        try:
            await site.start()
        except OSError as error:
            await self._runner.cleanup()
            raise SystemExit(f"cannot listen for metrics on {host}:{port}: {error}") from None
        self._probe = LagProbe(asyncio.get_running_loop(), self._lag)
        server = site._server
        assert isinstance(server, asyncio.Server)
        return int(server.sockets[0].getsockname()[1])

    async def aclose(self) -> None:
        if self._probe is not None:
            self._probe.stop()
        await self._runner.cleanup()

    async def _scrape(self, request: web.Request) -> web.Response:
        try:
            self._size.set(await self._database_size())
        except Exception:  # the other metrics still answer; the gauge keeps its last value
            log.warning("database size unknown", exc_info=True)
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

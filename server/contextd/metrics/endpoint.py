"""``GET /metrics`` on a port of its own, and what is measured there rather than on a
call's path: the event loop's lag, and figures read from the database when scraped."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Gauge, Histogram, generate_latest

from contextd.metrics.prometheus import PrometheusRecorder

log = logging.getLogger("contextd.metrics")

PATH = "/metrics"
# How often the lag probe asks to be woken; short enough to see a stall of a second.
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
            "How late the event loop ran a callback it was asked to run at a set time.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=recorder.registry,
        )
        app = web.Application()
        app.router.add_get(PATH, self._scrape)
        self._runner = web.AppRunner(app, access_log=None)
        self._probe: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen and start the lag probe; return the bound port."""
        await self._runner.setup()
        site = web.TCPSite(self._runner, host or None, port, reuse_address=True)
        try:
            await site.start()
        except OSError as error:
            await self._runner.cleanup()
            raise SystemExit(f"cannot listen for metrics on {host}:{port}: {error}") from None
        self._probe = asyncio.get_running_loop().create_task(self._measure_lag())
        server = site._server
        assert isinstance(server, asyncio.Server)
        return int(server.sockets[0].getsockname()[1])

    async def aclose(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
        await self._runner.cleanup()

    async def _scrape(self, request: web.Request) -> web.Response:
        try:
            self._size.set(await self._database_size())
        except Exception:  # the other metrics still answer; the gauge keeps its last value
            log.warning("database size unknown", exc_info=True)
        body = generate_latest(self._recorder.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _measure_lag(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            expected = loop.time() + LAG_INTERVAL_S
            await asyncio.sleep(LAG_INTERVAL_S)
            self._lag.observe(max(0.0, loop.time() - expected))

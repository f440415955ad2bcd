"""``GET /metrics`` of a server of several workers, served by a process of its own beside
them: at each scrape it asks every worker for a snapshot of its figures over the
worker's Unix socket, at once, and answers with their merge (across.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily

from contextd.metrics.across import Answer, Merged, Totals, parse
from contextd.metrics.endpoint import PATH

log = logging.getLogger("contextd.metrics")

# Seconds a worker has to answer; one that does not is left out of that scrape (its
# counters keep their last figures). Below Prometheus's default scrape timeout (10 s).
ANSWER_TIMEOUT = 3.0


class GatheringEndpoint:
    """Answer ``GET /metrics`` with the merged figures of the workers whose snapshots
    ``sockets`` serve (worker k at ``sockets[k]``)."""

    def __init__(self, sockets: Sequence[str], answer_timeout: float = ANSWER_TIMEOUT) -> None:
        self._sockets = list(sockets)
        self._timeout = aiohttp.ClientTimeout(total=answer_timeout)
        self._totals = Totals()
        # One scrape at a time: a slower scrape merging an older snapshot after a newer
        # one would move a counter back.
        self._merging = asyncio.Lock()
        app = web.Application()
        app.router.add_get(PATH, self._scrape)
        self._runner = web.AppRunner(app, access_log=None)

    async def start(self, host: str, port: int) -> int:
        """Listen; return the bound port."""
        await self._runner.setup()
        site = web.TCPSite(self._runner, host or None, port, reuse_address=True)
        try:
            await site.start()
        except OSError as error:
            await self._runner.cleanup()
            raise SystemExit(f"cannot listen for metrics on {host}:{port}: {error}") from None
        server = site._server
        assert isinstance(server, asyncio.Server)
        return int(server.sockets[0].getsockname()[1])

    async def aclose(self) -> None:
        await self._runner.cleanup()

    async def _scrape(self, request: web.Request) -> web.Response:
        async with self._merging:
            asked = await asyncio.gather(*(self._ask(i, p) for i, p in enumerate(self._sockets)))
            answers = {index: answer for index, answer in enumerate(asked) if answer is not None}
            families = self._totals.merge(answers)
        workers = GaugeMetricFamily(
            "contextd_workers",
            "Workers whose figures this scrape holds (--workers above 1 only).",
            value=len(answers),
        )
        registry = CollectorRegistry()
        registry.register(Merged([*families, workers]))
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _ask(self, index: int, path: str) -> Answer | None:
        """Worker ``index``'s snapshot; None (logged) when it does not answer in time:
        being started again, say."""
        connector = aiohttp.UnixConnector(path=path)
        try:
            async with (
                aiohttp.ClientSession(connector=connector, timeout=self._timeout) as session,
                session.get(f"http://worker{PATH}") as reply,
            ):
                reply.raise_for_status()
                return parse(index, await reply.read())
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as error:
            log.warning(
                "a worker's figures are missing from this scrape",
                extra={"worker_asked": index, "error": repr(error)},
            )
            return None

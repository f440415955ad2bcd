"""Composition root, the workers: ``--workers N`` runs N processes that each serve every
port of the server, started by one parent. The parent checks the settings and the ports
once, prepares the store once (migrations, the server's secrets), holds the data
directory's lock, forks the workers, starts again one that dies (waiting longer each
time it dies young, logged) and, on SIGTERM or SIGINT, stops them all within
``--shutdown-grace``.

The workers listen on the same ports with SO_REUSEPORT: the kernel hands each new
connection to one of them (one HTTP/2 connection stays on one worker). The ports were
checked free first (ports.py), so no other server shares them. Workers are forked
before any gRPC object exists (gRPC core does not survive a fork in the child) and after
what the settings load from files (tokenizers, keys), which they then share.

With --metrics-port, one more process started beside the workers (and started again
like them) serves that port: at each scrape it reads every worker's figures over a Unix
socket of the worker's own, in a directory only this user enters, and answers with the
whole server's (metrics/across.py)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import functools
import importlib
import logging
import os
import select
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from contextd.config import Settings
from contextd.metrics.endpoint import PATH as METRICS_PATH
from contextd.metrics.gathering import GatheringEndpoint
from contextd.providers.registry import make_provider
from contextd.root import server
from contextd.root.prepare import Prepared, prepare
from contextd.store.engine.private import make_dir
from contextd.tracing.setup import install_from_env

log = logging.getLogger("contextd.server")

# A worker that dies is started again after FIRST_BACKOFF, doubling each time it dies
# again young, up to MAX_BACKOFF; one that served HEALTHY_AFTER seconds starts at once.
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0
HEALTHY_AFTER = 60.0
_START_TIMEOUT = 120.0  # seconds a worker may take to serve at the first start
_POLL = 0.05  # seconds between looks at the workers
_KILL_MARGIN = 5.0
_PR_SET_PDEATHSIG = (
    1  # prctl(2)  # seconds past --shutdown-grace before a worker that hangs is killed
)


def serve_workers(settings: Settings) -> None:
    """Run ``settings.worker_count()`` workers until SIGINT or SIGTERM (SystemExit with
    the reason when the server cannot start)."""
    prepared = prepare(settings)  # every settings error, every taken port, at once
    server.warn_without_tls(settings, prepared.tls)
    settings = with_ports_picked(settings)
    make_dir(settings.data_dir)
    lock = server.lock_data_dir(settings)
    # The workers' metrics sockets: a directory of mode 0700, removed at the end.
    sockets = Path(tempfile.mkdtemp(prefix="contextd-")) if settings.metrics_port else None
    try:
        asyncio.run(prepare_once(settings))
        Supervisor(settings, prepared, settings.worker_count(), sockets).run()
    finally:
        if sockets is not None:
            shutil.rmtree(sockets, ignore_errors=True)
        if lock is not None:
            lock.release()
    log.info("stopped")


def with_ports_picked(settings: Settings) -> Settings:
    """``settings`` with a free port number for each port given as 0, so that every
    worker listens on the same one."""

    def picked(port: int, host: str) -> int:
        return _free_port(host) if port == 0 else port

    return dataclasses.replace(
        settings,
        port=picked(settings.port, settings.host),
        web_port=picked(settings.web_port, settings.web_host or settings.host),
        mcp_port=picked(settings.mcp_port, settings.mcp_host or settings.host),
    )


def _free_port(host: str) -> int:
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    with socket.socket(family, kind, proto) as probe:
        probe.bind(address)
        return int(probe.getsockname()[1])


async def prepare_once(settings: Settings) -> None:
    """Migrate the database and make the server's secrets once, before any worker; and
    load here the code every worker would load for itself at its start (the model
    provider's SDK, the MCP SDK), so that the workers share its pages."""
    db = await server.open_store(settings)
    try:
        await server.public_ids(db)
    finally:
        await db.close()
    provider = make_provider(
        settings.provider, base_url=settings.provider_base_url, model=settings.provider_model
    )
    await provider.aclose()
    if settings.mcp_port >= 0:
        importlib.import_module("contextd.fronts.mcp.http")


@dataclass
class _Worker:
    index: int
    pid: int
    started: float
    backoff: float


class Supervisor:
    """Starts the workers (and the metrics gatherer, index ``count``, when ``sockets``
    names the directory of the workers' metrics sockets), starts again those that die,
    stops them all."""

    def __init__(
        self, settings: Settings, prepared: Prepared, count: int, sockets: Path | None = None
    ) -> None:
        self._settings = settings
        self._prepared = prepared
        self._count = count
        self._sockets = [str(sockets / f"worker-{i}.sock") for i in range(count)] if sockets else []
        self._children = count + 1 if sockets else count
        self._running: dict[int, _Worker] = {}  # by pid
        self._due: dict[int, tuple[float, float]] = {}  # index -> (when, backoff)
        self._stop = False

    def run(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        try:
            self._start_all()
            while not self._stop:
                self._reap()
                self._restart_due()
                time.sleep(_POLL)
        finally:
            self._stop_all()

    def _on_signal(self, _sig: int, _frame: object) -> None:
        self._stop = True

    def _start_all(self) -> None:
        """Every worker, each serving before this returns; SystemExit when one ends first."""
        ready = {}
        for index in range(self._children):
            read, write = os.pipe()
            self._spawn(index, FIRST_BACKOFF, write)
            os.close(write)
            ready[index] = read
        deadline = time.monotonic() + _START_TIMEOUT
        for index, fd in ready.items():
            with contextlib.closing(os.fdopen(fd, "rb", buffering=0)) as pipe:
                wait = max(0.0, deadline - time.monotonic())
                readable, _, _ = select.select([pipe], [], [], wait)
                if not readable or pipe.read(1) != b"1":  # it ended (or hangs) before serving
                    raise SystemExit(
                        f"worker {self._label(index)} did not start (its lines above say why)"
                    )
        log.info(
            "workers serving",
            extra={
                "workers": self._count,
                "address": f"{self._settings.host}:{self._settings.port}",
            },
        )

    def _label(self, index: int) -> int | str:
        """What the lines of child ``index`` call it: its number, or ``metrics``."""
        return index if index < self._count else "metrics"

    def _spawn(self, index: int, backoff: float, ready: int | None = None) -> None:
        """Fork child ``index``; it writes to ``ready`` once it serves."""
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            if index == self._count:
                serve = functools.partial(_gather, self._settings, self._sockets, ready)
            else:
                socket_path = self._sockets[index] if self._sockets else ""
                serve = functools.partial(
                    _serve, self._settings, self._prepared, ready, index == 0, socket_path
                )
            _child_main(parent, self._label(index), serve)
        self._running[pid] = _Worker(index, pid, time.monotonic(), backoff)

    def _reap(self) -> None:
        while self._running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            worker = self._running.pop(pid, None)
            if worker is None or self._stop:
                continue
            lived = time.monotonic() - worker.started
            backoff = FIRST_BACKOFF if lived >= HEALTHY_AFTER else worker.backoff
            log.warning(
                "worker ended: starting it again",
                extra={
                    "worker": self._label(worker.index),
                    "pid": pid,
                    "exit": _exit_reason(status),
                    "lived_s": round(lived, 3),
                    "restart_in_s": backoff,
                },
            )
            self._due[worker.index] = (time.monotonic() + backoff, min(2 * backoff, MAX_BACKOFF))

    def _restart_due(self) -> None:
        now = time.monotonic()
        for index, (when, backoff) in list(self._due.items()):
            if when <= now:
                del self._due[index]
                self._spawn(index, backoff)  # it logs its own "listening"

    def _stop_all(self) -> None:
        """SIGTERM every worker (each drains within --shutdown-grace), then wait; one
        still running past the grace and a margin is killed."""
        for pid in self._running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + self._settings.shutdown_grace + _KILL_MARGIN
        while self._running and time.monotonic() < deadline:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid:
                self._running.pop(pid, None)
            else:
                time.sleep(_POLL)
        for pid in list(self._running):
            log.error("worker did not stop within the grace period: killed", extra={"pid": pid})
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _exit_reason(status: int) -> str:
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return f"code {os.waitstatus_to_exitcode(status)}"


class _WorkerTag(logging.Filter):
    """Each line a worker writes names it, and its process."""

    def __init__(self, label: int | str) -> None:
        super().__init__()
        self._label = label
        self._pid = os.getpid()

    def filter(self, record: logging.LogRecord) -> bool:
        record.worker = self._label
        record.pid = self._pid
        return True


def _child_main(
    parent: int, label: int | str, serve: Callable[[], Coroutine[Any, Any, None]]
) -> NoReturn:
    """A child's whole life, in the forked process: ``serve`` until SIGTERM or SIGINT."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)  # until its event loop handles them
    _stop_with_parent(parent)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_WorkerTag(label))
    code = 1
    try:
        asyncio.run(serve())
        code = 0
    except SystemExit as error:
        log.error(str(error.code))
    except BaseException:
        log.exception("worker failed")
    finally:
        logging.shutdown()
        os._exit(code)


def _stop_with_parent(parent: int) -> None:
    """SIGTERM this worker when its parent ends, however it ends (Linux): a worker
    never serves on without the process that holds the data directory's lock."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent ended before the line above
        os.kill(os.getpid(), signal.SIGTERM)


def _tell_ready(ready: int | None) -> None:
    if ready is not None:  # the parent waits for it at the first start
        os.write(ready, b"1")
        os.close(ready)


async def _serve(
    settings: Settings, prepared: Prepared, ready: int | None, sweeps: bool, metrics_socket: str
) -> None:
    """A worker: serve until SIGTERM or SIGINT. ``sweeps``: the worker that runs the
    passes over the whole database (retention), worker 0; ``metrics_socket``: where
    the gatherer reads its figures."""
    stop = server.stop_signalled()
    tracing = install_from_env()
    try:
        running = await server.start(
            settings, prepared=prepared, sweeps=sweeps, metrics_socket=metrics_socket
        )
        _tell_ready(ready)
        await stop.wait()
        await running.stop()
    finally:
        if tracing is not None:
            await asyncio.to_thread(tracing.shutdown)


async def _gather(settings: Settings, sockets: list[str], ready: int | None) -> None:
    """The metrics gatherer: serve --metrics-port until SIGTERM or SIGINT."""
    stop = server.stop_signalled()
    endpoint = GatheringEndpoint(sockets)
    host = settings.metrics_host or settings.host
    port = await endpoint.start(host, settings.metrics_port)
    log.info("metrics listening", extra={"address": f"{host}:{port}", "path": METRICS_PATH})
    _tell_ready(ready)
    await stop.wait()
    await endpoint.aclose()

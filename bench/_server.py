"""The server child of the throughput benchmarks: contextd's own ``start()`` with extra
bench handlers, in a process of its own so that client and server do not share an event
loop. The script re-runs itself with ``--serve``; the parent reads the port it prints."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from _common import stdin_closed

if TYPE_CHECKING:
    from contextd.root.server import RunningServer


async def serve(
    log_level: str,
    handlers: Sequence[grpc.GenericRpcHandler[Any, Any]],
    setup: Callable[[RunningServer], Awaitable[None]] | None = None,
    **settings: Any,
) -> None:
    """Run contextd plus ``handlers`` on a free port; print it; stop when stdin closes.
    ``setup`` runs once the server started, before the port is printed."""
    from contextd.config import Settings
    from contextd.root import logs
    from contextd.root.server import start

    if log_level.upper() != "OFF":
        logs.configure(log_level)  # as ``contextd serve`` does: one JSON line per RPC
    with tempfile.TemporaryDirectory(prefix="contextd-bench-") as tmp:
        running = await start(
            Settings(port=0, data_dir=Path(tmp), **settings), extra_handlers=handlers
        )
        if setup is not None:
            await setup(running)
        print(f"PORT {running.port}", flush=True)
        await stdin_closed()
        await running.stop(0)


@dataclass
class ServerChild:
    process: subprocess.Popen[str]
    port: int

    def cpu_seconds(self) -> float | None:
        """CPU time of all the server's threads so far, in ns resolution (Linux only)."""
        total = 0
        try:
            tasks = os.listdir(f"/proc/{self.process.pid}/task")
        except OSError:
            return None
        for tid in tasks:
            try:
                with open(f"/proc/{self.process.pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except OSError:  # the thread just ended
                continue
        return total / 1e9

    async def quiet(self) -> None:
        """Wait until the server is idle, so that background work (memories, summaries
        after chat turns) does not run into the next round. Idle = under 1 ms of CPU in
        50 ms; gives up after 30 s."""
        last = self.cpu_seconds()
        if last is None:
            return
        window: list[float] = []
        deadline = time.monotonic() + 30
        while (len(window) < 5 or sum(window[-5:]) >= 1e-3) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
            now = self.cpu_seconds() or last
            window.append(now - last)
            last = now

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def spawn_server(script: str, log_level: str, *args: str) -> ServerChild:
    """Start ``script --serve ARGS`` and wait for the port it prints."""
    # The server's log lines go to a scratch file: written like a real log, shown on failure.
    with tempfile.TemporaryFile(mode="w+", prefix="contextd-bench-log-") as log_file:
        process = subprocess.Popen(
            [sys.executable, script, "--serve", "--log-level", log_level, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,  # the child keeps its own descriptor after this one closes
            text=True,
        )
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            process.kill()
            process.wait()
            log_file.seek(0)
            raise RuntimeError(f"bench server did not start:\n{log_file.read()[-3000:]}")
    return ServerChild(process, int(line.split()[1]))

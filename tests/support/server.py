"""A real contextd server process on a free local port, for tests that talk to one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ServerProcess:
    process: subprocess.Popen[str]
    port: int
    data_dir: Path
    log_lines: list[dict[str, object]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def logs(self, msg: str | None = None) -> list[dict[str, object]]:
        return [entry for entry in list(self.log_lines) if msg is None or entry.get("msg") == msg]

    def wait_for_logs(
        self, msg: str, match: Callable[[dict[str, object]], bool], timeout: float = 5.0
    ) -> list[dict[str, object]]:
        """The ``msg`` lines ``match`` accepts, once there is one: the server writes a
        call's log line after its answer, and a thread reads it some time later."""
        deadline = time.monotonic() + timeout
        while True:
            found = [entry for entry in self.logs(msg) if match(entry)]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.01)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)


def start_server(
    data_dir: Path,
    *args: str,
    env: dict[str, str] | None = None,
    database_url: str = "",
    unset: tuple[str, ...] = (),
    ready: str = "listening",
) -> ServerProcess:
    """Start ``contextd serve --port 0`` and wait for the address it logs (in its line
    ``ready``); on the PostgreSQL database of ``database_url`` when given, else on SQLite
    in ``data_dir``; with this process's environment, ``env`` on top, without the
    variables ``unset`` names."""
    command = [sys.executable, "-m", "contextd", "serve", "--port", "0"]
    command += ["--data-dir", str(data_dir)]
    if database_url:
        command += ["--database-url", database_url]
    process = subprocess.Popen(
        [*command, *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={k: v for k, v in {**os.environ, **(env or {})}.items() if k not in unset},
    )
    assert process.stderr is not None
    lines: list[dict[str, object]] = []
    serving = threading.Event()
    port: list[int] = []

    def pump() -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            try:
                entry = json.loads(raw)
            except ValueError:
                entry = {"msg": raw.rstrip()}
            lines.append(entry)
            if entry.get("msg") == ready and not serving.is_set():
                port.append(int(str(entry["address"]).rsplit(":", 1)[1]))
                serving.set()
        serving.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + 30
    while not serving.wait(0.1):
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("contextd did not start within 30 s")
    if not port:
        raise RuntimeError(f"contextd exited before listening: {lines}")
    return ServerProcess(process, port[0], data_dir, lines)

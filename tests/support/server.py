"""A real contextd server process on a free local port, for tests that talk to one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
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

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)


def start_server(
    data_dir: Path, *args: str, env: dict[str, str] | None = None, database_url: str = ""
) -> ServerProcess:
    """Start ``contextd serve --port 0`` and wait for the address it logs; on the
    PostgreSQL database of ``database_url`` when given, else on SQLite in ``data_dir``."""
    command = [sys.executable, "-m", "contextd", "serve", "--port", "0"]
    command += ["--data-dir", str(data_dir)]
    if database_url:
        command += ["--database-url", database_url]
    process = subprocess.Popen(
        [*command, *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert process.stderr is not None
    lines: list[dict[str, object]] = []
    ready = threading.Event()
    port: list[int] = []

    def pump() -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            try:
                entry = json.loads(raw)
            except ValueError:
                entry = {"msg": raw.rstrip()}
            lines.append(entry)
            if entry.get("msg") == "listening" and not ready.is_set():
                port.append(int(str(entry["address"]).rsplit(":", 1)[1]))
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + 30
    while not ready.wait(0.1):
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("contextd did not start within 30 s")
    if not port:
        raise RuntimeError(f"contextd exited before listening: {lines}")
    return ServerProcess(process, port[0], data_dir, lines)

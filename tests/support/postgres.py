"""A throwaway PostgreSQL server from the installed binaries, for tests and benchmarks.

``initdb`` in a temporary directory, ``postgres`` on a free loopback port with its socket
in that directory, stopped and removed at the end. PostgreSQL refuses to run as root, so
under root the server runs as the ``postgres`` system user that Debian's package creates.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_SEARCHED = ("/usr/lib/postgresql",)


def find_bin_dir() -> Path | None:
    """The newest installed PostgreSQL's bin directory, or None."""
    on_path = shutil.which("initdb")
    if on_path:  # often a link into the versioned directory that holds the rest
        return Path(on_path).resolve().parent
    for root in _SEARCHED:
        versions = sorted(Path(root).glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
        if versions:
            return versions[-1].parent
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    bin_dir: Path
    root: Path
    port: int
    _process: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def postmaster_pid(self) -> int:
        """The server's main process (the parent of its backends)."""
        assert self._process is not None
        return self._process.pid

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _as_owner(self) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
        subprocess.run(
            [
                *self._as_owner(),
                str(self.bin_dir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
        )

    def start(self, timeout: float = 30.0) -> None:
        """Start the server (again, after ``stop``) and wait until it accepts connections."""
        # Started as the owner itself, not through runuser: stop() must signal
        # PostgreSQL, and runuser would answer SIGINT or SIGQUIT with SIGTERM and then
        # SIGKILL, which leaves the server's backends running.
        owner = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        self._process = subprocess.Popen(
            [
                str(self.bin_dir / "postgres"),
                "-D",
                str(self.data_dir),
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                f"unix_socket_directories={self.root}",
                "-c",
                "max_connections=200",
                # Throwaway data: no fsync (a restart of the server still loses nothing,
                # only a power cut would).
                "-c",
                "fsync=off",
                "-c",
                "full_page_writes=off",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(self.root / "server.log", "ab"),  # noqa: SIM115 - kept by the child
            user=owner.pw_uid if owner else None,
            group=owner.pw_gid if owner else None,
            extra_groups=[] if owner else None,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                log = (self.root / "server.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"postgres exited with {self._process.returncode}: {log}")
            probe = subprocess.run(
                [str(self.bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                capture_output=True,
            )
            if probe.returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("postgres did not accept connections in time")

    def stop(self, *, fast: bool = True) -> None:
        """Stop the server: SIGINT is a fast shutdown, SIGQUIT an immediate one (a crash)."""
        if self._process is None or self._process.poll() is not None:
            return
        if os.geteuid() == 0:
            # The child is runuser, which does not pass SIGINT on: pg_ctl signals the
            # server itself (from its postmaster.pid).
            mode = "fast" if fast else "immediate"
            pg_ctl = str(self.bin_dir / "pg_ctl")
            subprocess.run(
                [*self._as_owner(), pg_ctl, "-D", str(self.data_dir), "stop", "-m", mode, "-w"],
                capture_output=True,
            )
        else:
            self._process.send_signal(signal.SIGINT if fast else signal.SIGQUIT)
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def _client(self, program: str, *args: str) -> None:
        connection = ["-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]
        subprocess.run(
            [str(self.bin_dir / program), *connection, *args], check=True, capture_output=True
        )

    def create_database(self, name: str, template: str = "") -> str:
        """A new database, empty or a copy of ``template``; returns its URL."""
        self._client("createdb", *(["--template", template] if template else []), name)
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        self._client("dropdb", "--if-exists", name)


@contextlib.contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """A started throwaway server; raises LookupError when PostgreSQL is not installed."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise LookupError("PostgreSQL's server binaries (initdb, postgres) are not installed")
    root = Path(tempfile.mkdtemp(prefix="contextd-pg-"))
    server = PostgresServer(bin_dir=bin_dir, root=root, port=_free_port())
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)

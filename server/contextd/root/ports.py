"""Composition root, the ports before they are bound: each port the settings name is
checked free, so that a second server never shares a port with the first. gRPC core
listens with SO_REUSEPORT on Linux, and the kernel would then hand each new connection
to one server or the other: two databases behind one address. A port another process
listens on stops the start with its number and, where this user may see it, the process
that holds it. A port left in TIME_WAIT by a server that just stopped is free."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from contextd.config import Settings

_LISTEN = "0A"  # the state column of /proc/net/tcp for a listening socket
_HIGHEST = 65535
_MAX_COMMAND = 120  # characters of the holder's command line shown


@dataclass(frozen=True, slots=True)
class Port:
    """A port the server listens on: the flag that names it, its host and number."""

    flag: str
    host: str
    number: int

    def __str__(self) -> str:
        return f"{self.host or '*'}:{self.number} ({self.flag})"


def listened_ports(settings: Settings) -> list[Port]:
    """Every TCP port the settings make the server listen on (0: any free one)."""
    ports = [Port("--port", settings.host, settings.port)]
    if settings.web_port >= 0:
        ports.append(Port("--web-port", settings.web_host or settings.host, settings.web_port))
    if settings.mcp_port >= 0:
        ports.append(Port("--mcp-port", settings.mcp_host or settings.host, settings.mcp_port))
    if settings.metrics_port > 0:
        host = settings.metrics_host or settings.host
        ports.append(Port("--metrics-port", host, settings.metrics_port))
    return ports


def check_free(ports: list[Port]) -> None:
    """SystemExit naming every port of ``ports`` that cannot be listened on (a port
    number 0 is picked free by the system when bound; one out of range is a settings
    error of its own)."""
    checked = [port for port in ports if 0 < port.number <= _HIGHEST]
    taken = [problem for port in checked if (problem := bind_problem(port))]
    if taken:
        raise SystemExit("cannot listen: " + "; ".join(taken))


def bind_problem(port: Port) -> str | None:
    """Why ``port`` cannot be bound, or None. Each address the host names is bound once
    without SO_REUSEPORT (so a listener that set it still conflicts) and with
    SO_REUSEADDR (so connections in TIME_WAIT do not), then let go."""
    try:
        addresses = socket.getaddrinfo(
            port.host or None,
            port.number,
            type=socket.SOCK_STREAM,
            proto=socket.IPPROTO_TCP,
            flags=socket.AI_PASSIVE,
        )
    except socket.gaierror as error:
        return f"{port}: the host does not resolve ({error.strerror})"
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    return f"{port} is already in use by {holder(port.number)}"
                return f"{port}: {error.strerror}"
    return None


def holder(port: int) -> str:
    """Who listens on TCP ``port``, in words: the process id and command line when this
    user may see it (Linux /proc), else as much as is known."""
    inodes = set(_listening_inodes(port))
    if not inodes:
        return "another socket"
    for pid, command in _processes_holding(inodes):
        if len(command) > _MAX_COMMAND:
            command = command[: _MAX_COMMAND - 1] + "…"
        return f"pid {pid} ({command})"
    return "a process this user cannot see"


def _listening_inodes(port: int) -> Iterator[str]:
    """The inodes of the sockets listening on ``port``, from /proc/net/tcp and tcp6."""
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            lines = Path("/proc/net", table).read_text().splitlines()[1:]
            for line in lines:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == _LISTEN and int(local.rsplit(":", 1)[1], 16) == port:
                    yield inode


def _processes_holding(inodes: set[str]) -> Iterator[tuple[int, str]]:
    """The processes this user may see that have one of the socket ``inodes`` open."""
    wanted = {f"socket:[{inode}]" for inode in inodes}
    with contextlib.suppress(OSError):
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
        for pid in sorted(pids):
            with contextlib.suppress(OSError):
                fds = Path(f"/proc/{pid}/fd")
                if any(os.readlink(fds / fd) in wanted for fd in os.listdir(fds)):
                    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                    yield pid, raw.replace(b"\0", b" ").decode(errors="replace").strip()

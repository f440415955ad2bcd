"""A port another process listens on stops a server's start, on every port it opens
(native, web, MCP, metrics): never two servers behind one address. A port a stopped
server left in TIME_WAIT is free."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd.config import Settings
from contextd.root import server as contextd_server
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.sdk import free_port
from tests.support.server import ServerProcess, start_server

FLAGS = {
    "--port": "listening",
    "--web-port": "grpc-web listening",
    "--mcp-port": "mcp listening",
    "--metrics-port": "metrics listening",
}
_LISTEN, _TIME_WAIT = "0A", "06"
# A client's first bytes on HTTP/2: the preface, then an empty SETTINGS frame.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def tcp_states(port: int) -> list[str]:
    """The states of the TCP sockets whose local port is ``port`` (/proc/net/tcp*)."""
    states = []
    for table in ("tcp", "tcp6"):
        for line in Path("/proc/net", table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                states.append(fields[3])
    return states


def read_until_settings_acknowledged(connection: socket.socket) -> None:
    """Read HTTP/2 frames until the server acknowledges the client's SETTINGS."""
    buffer = b""

    def more() -> bytes:
        chunk = connection.recv(65536)
        assert chunk, "the server closed before acknowledging"
        return chunk

    while True:
        while len(buffer) < 9:
            buffer += more()
        length = int.from_bytes(buffer[:3], "big")
        kind, flags = buffer[3], buffer[4]
        while len(buffer) < 9 + length:
            buffer += more()
        buffer = buffer[9 + length :]
        if kind == 4 and flags & 1:
            return


def ports_of(server: ServerProcess) -> dict[str, int]:
    return {
        flag: int(str(line["address"]).rsplit(":", 1)[1])
        for flag, msg in FLAGS.items()
        for line in server.logs(msg)
    }


def answers(flag: str, port: int) -> bool:
    """Whether the server's ``flag`` port answers as that port should."""
    if flag == "--port":
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=10
            )
            return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)
    path = {"--web-port": "/healthz", "--metrics-port": "/metrics", "--mcp-port": "/mcp"}[flag]
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return bool(reply.status == 200)
    except urllib.error.HTTPError as error:  # MCP answers a bare GET with a 4xx of its own
        return flag == "--mcp-port" and 400 <= error.code < 500


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("first")
    metrics = str(free_port())
    server = start_server(data_dir, "--web-port", "0", "--mcp-port", "0", "--metrics-port", metrics)
    yield server
    server.stop()


@pytest.mark.parametrize("flag", list(FLAGS))
def test_a_second_server_on_a_taken_port_exits_naming_it(
    first: ServerProcess, tmp_path: Path, flag: str
) -> None:
    port = ports_of(first)[flag]
    others = {"--port": "0", "--web-port": "-1", "--mcp-port": "-1", "--metrics-port": "0"}
    options = [
        part for name, value in {**others, flag: str(port)}.items() for part in (name, value)
    ]
    second = subprocess.run(
        [sys.executable, "-m", "contextd", "serve", "--data-dir", str(tmp_path), *options],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode != 0
    assert f"127.0.0.1:{port} ({flag}) is already in use by pid {first.process.pid} (" in (
        second.stderr
    )
    assert "contextd serve" in second.stderr
    assert not [line for line in second.stderr.splitlines() if "listening" in line]
    # The first server still holds the port alone, and answers on it.
    assert tcp_states(port).count(_LISTEN) == 1
    assert answers(flag, port)


async def test_a_port_another_program_shares_is_refused(tmp_path: Path) -> None:
    """A listener that allows sharing (SO_REUSEPORT, as gRPC core sets by default) is
    not joined: the start fails naming this process."""
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        with pytest.raises(
            SystemExit, match=f"{port} \\(--port\\) is already in use by pid {os.getpid()} "
        ):
            await contextd_server.start(Settings(port=port, data_dir=tmp_path))
        assert tcp_states(port).count(_LISTEN) == 1


def test_ports_a_stopped_server_left_in_time_wait_are_free(tmp_path: Path) -> None:
    """Connections the stopping server closed first stay in TIME_WAIT on its ports; a
    server started right after on the same ports starts."""
    ports = {flag: free_port() for flag in FLAGS}
    options = [part for flag, port in ports.items() for part in (flag, str(port))]
    before = start_server(tmp_path / "before", *options, "--shutdown-grace", "1")
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for port in ports.values()]
    held[0].sendall(HTTP2_PREFACE)  # gRPC drops a connection that never speaks HTTP/2 at once
    read_until_settings_acknowledged(held[0])  # nothing of ours left unread: it closes, no reset
    try:
        assert before.stop() == 0
    finally:  # the server closed each first: its side waits in TIME_WAIT once ours closes
        for connection in held:  # read to the end: closing with unread bytes resets it
            while connection.recv(65536):
                pass
            connection.close()
    deadline = time.monotonic() + 10
    while not all(_TIME_WAIT in tcp_states(p) for p in ports.values()):
        assert time.monotonic() < deadline, {p: tcp_states(p) for p in ports.values()}
        time.sleep(0.02)
    after = start_server(tmp_path / "after", *options)
    try:
        assert ports_of(after) == ports
        assert all(answers(flag, port) for flag, port in ports.items())
    finally:
        after.stop()

"""The MCP port's start and stop: settings refused before anything starts, a port in
use, the listener's sockets, and a clean stop with sessions open."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from contextd.fronts.mcp.http import _listening_socket

from tests.mcp_server.conftest import call, connect, mcp_url
from tests.support.server import start_server


def serve(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "contextd", "serve", "--port", "0"]
    return subprocess.run(
        [*command, "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--mcp-port", "70000"), "--mcp-port must be from -1 to 65535"),
        (("--openai-api",), "--openai-api is served on the web port: set --web-port too"),
        (("--mcp-port", "0", "--mcp-host", "0.0.0.0"), "--auth none"),
    ],
    ids=["port out of range", "openai without the web port", "open MCP host without auth"],
)
def test_settings_that_cannot_work_are_refused_at_start(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    done = serve(tmp_path, *args)
    assert done.returncode != 0
    assert message in done.stderr


def test_a_port_in_use_is_refused_with_its_address(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = serve(tmp_path, "--mcp-port", str(port))
    assert done.returncode != 0
    assert f"127.0.0.1:{port} (--mcp-port) is already in use by pid {os.getpid()}" in done.stderr


def test_the_listener_names_tcp_so_that_answers_are_not_held_back() -> None:
    """asyncio turns Nagle's algorithm off only on connections of a socket whose protocol
    is IPPROTO_TCP; one made without it held every answer for a delayed ACK."""
    listener = _listening_socket("127.0.0.1", 0)
    try:
        assert listener.proto == socket.IPPROTO_TCP
    finally:
        listener.close()


async def test_the_server_stops_cleanly_with_an_mcp_session_open(tmp_path: Path) -> None:
    proc = start_server(tmp_path, "--mcp-port", "0")
    try:
        async with connect(mcp_url(proc), **{"X-Contextd-User": "ivy"}) as client:
            await call(client, "list_sessions")
            assert proc.stop() == 0
    finally:
        proc.stop()
    assert not [e for e in proc.log_lines if e.get("level") in ("ERROR", "CRITICAL")]
    assert proc.logs("stopped")

"""Starting a port beside the native one, as every front that listens does it (the
composition root starts them all, root/listeners.py)."""

from __future__ import annotations


def cannot_listen(port_name: str, host: str, port: int, error: OSError) -> SystemExit:
    """The start's end when ``port_name`` (the web port, the MCP port) cannot listen on
    ``host:port``: the server stops with the address and the system's reason."""
    return SystemExit(f"cannot listen for {port_name} on {host}:{port}: {error}")

"""What one request may carry and what a port holds at once: one set of limits, read by
every front (the native port, the web port with the model APIs on it, the MCP port).
Each front refuses in its own protocol's shape; the composition root fills them from
the settings of the same names.

A request body is read whole before it becomes a native call, so the largest message
bounds every front's body, and the HTTP ports cap their connections so that slow
clients cannot hold memory by opening many.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RequestLimits:
    # The largest native message (request or answer), and so the largest request body
    # of every HTTP front (the web port adds room for its framing).
    max_message_bytes: int = 16 * 1024 * 1024
    # Native calls served at once on the native port.
    max_concurrent_rpcs: int = 1000
    # Connections open at once on each HTTP port (web, MCP); more are answered 503.
    web_max_connections: int = 1000
    # Seconds a whole request body may take to arrive on the web port.
    web_body_timeout: float = 30.0
    # Request bytes the web port holds for all its calls together.
    web_max_buffered_bytes: int = 256 * 1024 * 1024

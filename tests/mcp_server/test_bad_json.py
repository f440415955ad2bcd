"""The MCP port refuses a body that is not text (half of a UTF-16 surrogate pair in a
JSON string) with a JSON-RPC parse error, not a server error."""

from __future__ import annotations

import httpx
import pytest

from tests.mcp_server.conftest import mcp_url
from tests.support.server import ServerProcess

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.mark.parametrize("half", [b"\\ud800", b"\xed\xa0\x80"], ids=["escape", "bytes"])
def test_an_unpaired_surrogate_is_a_parse_error(open_server: ServerProcess, half: bytes) -> None:
    body = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": '
        b'"2025-06-18", "capabilities": {}, "clientInfo": {"name": "a' + half + b'", '
        b'"version": "1"}}}'
    )
    response = httpx.post(mcp_url(open_server), content=body, headers=ACCEPT, timeout=30)
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["error"]["code"] == -32700

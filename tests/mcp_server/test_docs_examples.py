"""The client configurations of docs/mcp.md are valid JSON, and the Claude Desktop one
starts a working stdio server as written (its command replaced by this checkout's)."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from mcp import Client, StdioServerParameters

from tests.mcp_server.conftest import call
from tests.support.keyed_server import KeyedServer
from tests.support.paths import ROOT

PAGE = ROOT / "docs" / "mcp.md"


def configurations() -> list[dict[str, Any]]:
    text = PAGE.read_text(encoding="utf-8")
    return [json.loads(block) for block in re.findall(r"^```json\n(.*?)^```$", text, re.M | re.S)]


def test_the_vs_code_configuration_names_the_mcp_path() -> None:
    vscode = next(c for c in configurations() if "servers" in c)
    server = vscode["servers"]["contextd"]
    assert server["type"] == "http" and server["url"].endswith("/mcp")
    assert server["headers"]["Authorization"].startswith("Bearer ${input:")


async def test_the_claude_desktop_configuration_runs(keyed: KeyedServer) -> None:
    claude = next(c for c in configurations() if "mcpServers" in c)
    server = claude["mcpServers"]["contextd"]
    assert server["command"].endswith("/contextd")
    args = [a if a != "127.0.0.1:50151" else keyed.address for a in server["args"]]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "contextd", *args],
        env={**server["env"], "CONTEXTD_API_KEY": keyed.alice},
    )
    async with Client(params) as client:
        assert (await call(client, "list_sessions"))["sessions"] == []

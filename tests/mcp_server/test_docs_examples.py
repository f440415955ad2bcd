"""The client configurations of docs/mcp.md are valid JSON, and the Claude Desktop one
starts a working stdio server as written (its command replaced by this checkout's)."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from mcp import Client, StdioServerParameters

from tests.mcp_server.conftest import call, connect, mcp_url
from tests.support.keyed_server import KeyedServer
from tests.support.paths import ROOT
from tests.support.server import ServerProcess

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


async def test_the_page_lists_every_tool_its_title_and_output(open_server: ServerProcess) -> None:
    async with connect(mcp_url(open_server)) as client:
        tools = (await client.list_tools()).tools
    text = PAGE.read_text(encoding="utf-8")
    for tool in tools:
        assert f"| `{tool.name}` | {tool.title} |" in text, tool.name
        # The table of what each tool returns: its row names every field of its schema.
        [returns] = [
            line
            for line in text.splitlines()
            if line.startswith(f"| `{tool.name}` | ") and line.count("|") == 3
        ]
        assert tool.output_schema is not None
        for name in tool.output_schema["properties"]:
            assert f"`{name}`" in returns, (tool.name, name)

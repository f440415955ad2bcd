"""The official MCP TypeScript SDKs (tests/mcp_node, installed from its lock file by
``make test``) against the MCP port: ``@modelcontextprotocol/sdk`` 1.x with the
initialize handshake, and ``@modelcontextprotocol/client`` 2.x with the handshake and
in the stateless 2026-07-28 form. Each lists the tools with their hints and output
schemas, adds and finds a memory (structured content), gets a refused argument told in
plain words, reads a resource that is not there, and gets the prompt."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from tests.mcp_server.conftest import mcp_url
from tests.mcp_server.test_tool_hints import DESTRUCTIVE, READ_ONLY
from tests.support.paths import ROOT
from tests.support.server import ServerProcess

PROJECT = ROOT / "tests" / "mcp_node"


def run_check(url: str, user: str) -> dict[str, dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    assert (PROJECT / "node_modules" / "@modelcontextprotocol").exists(), (
        "tests/mcp_node/node_modules is missing: run `make test` first"
    )
    done = subprocess.run(
        [node, str(PROJECT / "check.mjs"), url, user],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return {line.pop("client"): line for line in lines}


def test_both_node_sdks_in_both_protocol_generations(open_server: ServerProcess) -> None:
    results = run_check(mcp_url(open_server), "nia")
    assert {name: r["version"] for name, r in results.items()} == {
        "sdk": "2025-11-25",
        "legacy": "2025-11-25",
        "2026-07-28": "2026-07-28",
    }
    for name, result in results.items():
        tools = {t["name"]: t for t in result["tools"]}
        assert len(tools) == 9, name
        for tool in tools.values():
            hints = tool["annotations"]
            assert hints["title"] == tool["title"], tool
            assert hints["readOnlyHint"] is (tool["name"] in READ_ONLY), tool
            assert hints["destructiveHint"] is (tool["name"] in DESTRUCTIVE), tool
            assert tool["output"], tool
        assert tools["search_memories"]["output"] == ["memories", "note"]
        assert result["added"]["created"] is True
        assert result["added"]["memory"]["content"] == "Node users like types."
        [found] = result["found"]["memories"]
        assert found["id"] == result["added"]["memory"]["id"] and found["score"] > 0
        assert result["bad"] == {
            "isError": True,
            "text": "Invalid arguments to search_memories: limit must be at most 100.",
        }
        assert "NOT_FOUND: no session with id" in result["missing"]["message"]
        assert "- Node users like types." in result["prompt"]
    # The 1.x SDK hands over the handshake versions' code as the server sent it; the 2.x
    # client speaks of a resource not found as -32602, the code of 2026-07-28.
    assert results["sdk"]["missing"]["code"] == -32002
    assert results["2026-07-28"]["missing"]["code"] == -32602

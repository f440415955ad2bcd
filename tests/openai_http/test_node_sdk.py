"""The official ``openai`` Node package (tests/openai_node, installed from its lock file by
``make test``) against /v1: a whole answer, a stream with usage, host tools in a session,
and a refusal raised as the package's own error."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from tests.openai_http.conftest import MODEL, Served
from tests.support.paths import ROOT

PROJECT = ROOT / "tests" / "openai_node"


def run_check(served: Served, user: str) -> dict[str, dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    assert (PROJECT / "node_modules" / "openai").exists(), (
        "tests/openai_node/node_modules is missing: run `make test` first"
    )
    done = subprocess.run(
        [node, str(PROJECT / "check.mjs"), served.base_url, "unused", user],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return {line.pop("name"): line for line in lines}


def test_the_node_package_runs_every_check(served: Served) -> None:
    results = run_check(served, "node-user")
    assert results["models"] == {"model": MODEL}
    whole = results["whole"]
    assert whole["content"] == "fake answer to: Hello from Node"
    assert (whole["finish"], whole["mode"]) == ("stop", "inline")
    assert whole["usage"]["prompt_tokens_details"]["cached_tokens"] == 3
    stream = results["stream"]
    assert stream["text"] == "fake answer to: Stream to Node"
    assert stream["usage"]["total_tokens"] == 18
    assert results["tool_call"] == {"finish": "tool_calls", "tool": "get_weather", "id": "call_w1"}
    assert results["tool_result"] == {"content": "the tool said: rainy", "turn": 2}
    assert results["refused"] == {
        "thrown": True,
        "status": 400,
        "param": "n",
        "code": "unsupported_parameter",
    }
    [session] = [s for s in served.sessions("node-user") if s.id == stream["sessionId"]]
    assert session.message_count == 6  # the stream's turn, then the tool call and its result

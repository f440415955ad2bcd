"""The examples of docs/anthropic.md run as written against a live /v1/messages: the
anthropic SDK's, and the Claude Agent SDK's (tests/anthropic_node, installed from its
lock file by ``make test``), whose bundled Claude Code program runs a tool loop."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.anthropic_http.conftest import base_url
from tests.openai_http.conftest import Served
from tests.support.paths import ROOT

PAGE = ROOT / "docs" / "anthropic.md"
NODE_PROJECT = ROOT / "tests" / "anthropic_node"
DOCUMENTED = "http://127.0.0.1:50152"


def test_the_python_examples_run(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.M | re.S)
    assert len(blocks) == 3, "the page's examples: a turn, a stream and a session, editing"
    code = "\n".join(blocks).replace(DOCUMENTED, base_url(served))
    scope: dict[str, object] = {"__name__": "__docs__"}
    exec(compile(code, str(PAGE), "exec"), scope)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "fake answer to: Which city has the best food, Lisbon or Porto?"
    assert printed[1] == "0"  # no history: the system prompt and the question
    assert printed[2] == "fake answer to: I am vegetarian.fake answer to: Suggest a dinner."
    assert printed[3] == "[]"
    second = scope["second"]
    assert second.model_extra["contextd"]["turn_index"] == 2  # type: ignore[attr-defined]


def test_the_claude_agent_sdk_example_runs_a_tool_loop(served: Served, tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    assert (NODE_PROJECT / "node_modules" / "@anthropic-ai" / "claude-agent-sdk").exists(), (
        "tests/anthropic_node/node_modules is missing: run `make test` first"
    )
    [example] = re.findall(r"^```js\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.M | re.S)
    code = (
        example.replace(DOCUMENTED, base_url(served))
        .replace("ctxd_...", "unused")
        .replace("User: alice", "User: agent-alice")
    )
    # Beside its packages; the program runs in an empty folder with an empty home.
    script = NODE_PROJECT / f".docs-example-{os.getpid()}.mjs"
    script.write_text(code, encoding="utf-8")
    before = len(served.model.chat_requests())
    try:
        done = subprocess.run(
            [node, str(script)],
            cwd=tmp_path,
            env={**os.environ, "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        script.unlink()
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["the tool said: sunny in Paris"]
    first, second = served.model.chat_requests()[before:]
    offered = [t["function"]["name"] for t in first["tools"]]
    assert "mcp__weather__get_weather" in offered
    # None of Claude Code's own tools, none of contextd's (inline mode).
    assert not {"Bash", "Read", "memory_search"} & set(offered)
    assert first["messages"][-1]["content"].endswith("What is the weather in Paris?")
    [call] = second["messages"][-2]["tool_calls"]
    assert call["function"]["name"] == "mcp__weather__get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_w1",
        "content": "sunny in Paris",
    }
    # Named by its header, the program's user: its two steps are hers (inline, they
    # store nothing: the audit log names the user of each).
    steps = [
        line
        for line in served.proc.logs("audit")
        if line.get("method") == "/contextd.v1.ChatService/StreamChat"
        and line.get("user") == "agent-alice"
    ]
    assert len(steps) == 2
    assert served.sessions("agent-alice") == []

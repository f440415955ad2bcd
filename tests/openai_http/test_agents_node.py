"""The AI SDK (``@ai-sdk/openai`` on the Responses API and on Chat Completions,
``@ai-sdk/openai-compatible``: generateText, streamText, generateObject, a stopWhen tool
loop) and the OpenAI Agents SDK (``@openai/agents``: a two-tool agent run to its end),
from tests/agents_node (installed from its lock file by ``make test``), against /v1 on
the offline echo model with an API key."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.grpc_web import web_address
from tests.support.keyed_server import KeyedServer, keyed_server
from tests.support.paths import ROOT

PROJECT = ROOT / "tests" / "agents_node"
KINDS = ("responses", "chat", "compatible")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    assert (PROJECT / "node_modules" / "ai").exists(), (
        "tests/agents_node/node_modules is missing: run `make test` first"
    )
    server: KeyedServer
    with keyed_server(
        tmp_path_factory.mktemp("agents-node"), "--web-port", "0", "--openai-api"
    ) as server:
        done = subprocess.run(
            [
                node,
                str(PROJECT / "check.mjs"),
                f"http://{web_address(server.proc)}/v1",
                server.alice,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    yield {line.pop("name"): line for line in lines}


def result(results: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    found = results[name]
    assert "error" not in found, found["error"][-3000:]
    return found


@pytest.mark.parametrize("kind", KINDS)
def test_generate_and_stream_text(results: dict[str, dict[str, Any]], kind: str) -> None:
    whole = result(results, f"{kind}.generateText")
    assert whole["text"].startswith("echo: I received 1 message ")
    assert whole["finishReason"] == "stop" and whole["inputTokens"] > 0
    streamed = result(results, f"{kind}.streamText")
    assert streamed["streamed"] == streamed["text"]
    assert streamed["text"].startswith("echo: I received 1 message ")


@pytest.mark.parametrize("kind", KINDS)
def test_generate_object(results: dict[str, dict[str, Any]], kind: str) -> None:
    trip = result(results, f"{kind}.generateObject")["object"]
    assert set(trip) == {"city", "days", "sights"} and 2 <= trip["days"] <= 9


@pytest.mark.parametrize("kind", KINDS)
def test_a_stop_when_tool_loop(results: dict[str, dict[str, Any]], kind: str) -> None:
    loop = result(results, f"{kind}.toolLoop")
    assert loop["called"] == ["time", "weather"]
    assert loop["steps"] == 2
    assert loop["results"] == ["noon in echo", "sunny in echo"]
    # The second step got the whole history: the question, the calls, both results.
    assert loop["text"].startswith("echo: I received 4 messages ")


def test_an_agent_runs_two_tools_to_its_end(results: dict[str, dict[str, Any]]) -> None:
    agent = result(results, "agents.run")
    assert agent["calls"] == ["look_up", "translate"]
    assert agent["finalOutput"].startswith("echo: I received ")

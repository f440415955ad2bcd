"""The official ``@anthropic-ai/sdk`` Node package and the AI SDK's ``@ai-sdk/anthropic``
with a custom base URL (tests/anthropic_node, installed from its lock file by ``make
test``) against /v1/messages: a whole answer, the stream helper, host tools in a
stateless loop, count_tokens and a refusal raised as the package's own error;
generateText, streamText and a tool loop of the AI SDK."""

from __future__ import annotations

from tests.anthropic_http.conftest import MODEL, base_url
from tests.openai_http.conftest import Served
from tests.support.node_check import run_node_check
from tests.support.paths import ROOT

PROJECT = ROOT / "tests" / "anthropic_node"


def test_the_node_packages_run_every_check(served: Served) -> None:
    results = run_node_check(
        PROJECT, "@anthropic-ai/sdk", base_url(served), "unused", "node-user", MODEL
    )
    assert results["whole"] == {
        "text": "fake answer to: Hello from Node",
        "stop": "end_turn",
        "usage": {
            "input_tokens": 8,
            "output_tokens": 7,
            "cache_read_input_tokens": 3,
            "cache_creation_input_tokens": 0,
        },
        "mode": "inline",
    }
    text = "fake answer to: Stream to Node"
    assert results["stream"] == {"text": text, "final": text, "stop": "end_turn"}
    assert results["tools"] == {
        "stop": "tool_use",
        "tool": "get_weather",
        "input": {"city": "Paris"},
        "answer": "the tool said: rainy",
    }
    assert results["count"]["tokens"] > 0
    assert results["refused"] == {
        "thrown": True,
        "status": 400,
        "type": "invalid_request_error",
    }
    assert results["generateText"] == {
        "text": "fake answer to: Hello from the AI SDK",
        "finish": "stop",
    }
    assert results["streamText"] == {
        "text": "fake answer to: Stream from the AI SDK",
        "finish": "stop",
    }
    assert results["toolLoop"] == {
        "steps": 2,
        "calls": ["get_weather"],
        "text": "the tool said: sunny in Paris",
    }
    # Named by its header, the AI SDK's user: its turns are that user's (inline, they
    # store nothing: the audit log names the user of each).
    turns = [
        line
        for line in served.proc.logs("audit")
        if line.get("method") == "/contextd.v1.ChatService/StreamChat"
        and line.get("user") == "node-user"
    ]
    assert len(turns) >= 6

"""The official ``openai`` Node package (tests/openai_node, installed from its lock file by
``make test``) against /v1: a whole answer, a stream with usage, host tools in a session,
and a refusal raised as the package's own error."""

from __future__ import annotations

from tests.openai_http.conftest import MODEL, Served
from tests.support.node_check import run_node_check
from tests.support.paths import ROOT

PROJECT = ROOT / "tests" / "openai_node"


def test_the_node_package_runs_every_check(served: Served) -> None:
    results = run_node_check(PROJECT, "openai", served.base_url, "unused", "node-user")
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

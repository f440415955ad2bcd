"""One request limit, read by every front: a server with every front on and a small
--max-message-bytes refuses a request over it on each (the native port, gRPC-Web and
Connect on the web port, the OpenAI and Anthropic APIs there, the MCP port), each in its
own protocol's shape, with the clients people use. Over the default limit none of these
requests would be refused, so a front that decided its own limit fails here."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import anthropic
import grpc
import httpx
import openai
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc

from tests.mcp_server.conftest import mcp_url
from tests.support.grpc_web import frame, method_url, parse_body, request_headers, web_address
from tests.support.server import ServerProcess, start_server

LIMIT = 256 * 1024  # --max-message-bytes
# Over the limit with room to spare: the web port reads a body up to the limit plus its
# framing room before the native server refuses it.
BIG = "x" * (2 * LIMIT)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(
        tmp_path_factory.mktemp("request-limits"),
        *("--max-message-bytes", str(LIMIT), "--web-port", "0", "--mcp-port", "0"),
        *("--openai-api", "--anthropic-api"),
    )
    yield proc
    assert proc.stop() == 0


def native(proc: ServerProcess) -> None:
    with grpc.insecure_channel(proc.address) as channel:
        stub = context_pb2_grpc.ContextServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.BuildMessages(pb.BuildMessagesRequest(user_message=BIG), timeout=10)
    assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED


def grpc_web(proc: ServerProcess) -> None:
    body = frame(pb.BuildMessagesRequest(user_message=BIG).SerializeToString())
    url = method_url(web_address(proc), "contextd.v1.ContextService/BuildMessages")
    answer = httpx.post(url, content=body, headers=request_headers(), timeout=10)
    messages, trailers = parse_body(answer.content, text=False)
    assert not messages
    assert trailers["grpc-status"] == str(grpc.StatusCode.RESOURCE_EXHAUSTED.value[0])


def connect(proc: ServerProcess) -> None:
    url = method_url(web_address(proc), "contextd.v1.ContextService/BuildMessages")
    answer = httpx.post(url, json={"userMessage": BIG}, timeout=10)
    assert answer.status_code == 429
    assert answer.json()["code"] == "resource_exhausted"


def _openai(proc: ServerProcess) -> openai.OpenAI:
    url = f"http://{web_address(proc)}/v1"
    return openai.OpenAI(base_url=url, api_key="unused", max_retries=0)


def openai_chat(proc: ServerProcess) -> None:
    with _openai(proc) as client, pytest.raises(openai.APIStatusError) as refused:
        client.chat.completions.create(model="echo", messages=[{"role": "user", "content": BIG}])
    assert refused.value.status_code == 413
    assert refused.value.code == "request_too_large"


def openai_responses(proc: ServerProcess) -> None:
    with _openai(proc) as client, pytest.raises(openai.APIStatusError) as refused:
        client.responses.create(model="echo", input=BIG)
    assert refused.value.status_code == 413
    assert refused.value.code == "request_too_large"


def anthropic_messages(proc: ServerProcess) -> None:
    url = f"http://{web_address(proc)}"
    with (
        anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0) as client,
        pytest.raises(anthropic.APIStatusError) as refused,
    ):
        client.messages.create(
            model="echo", max_tokens=16, messages=[{"role": "user", "content": BIG}]
        )
    assert refused.value.status_code == 413
    assert refused.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]


def mcp(proc: ServerProcess) -> None:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search_memories", "arguments": {"query": BIG}},
    }
    answer = httpx.post(
        mcp_url(proc),
        json=message,
        headers={"Accept": "application/json, text/event-stream"},
        timeout=10,
    )
    assert answer.status_code == 413


FRONTS: dict[str, Callable[[ServerProcess], None]] = {
    "native": native,
    "grpc-web": grpc_web,
    "connect": connect,
    "openai chat": openai_chat,
    "openai responses": openai_responses,
    "anthropic messages": anthropic_messages,
    "mcp": mcp,
}


@pytest.mark.parametrize("front", sorted(FRONTS))
def test_a_request_over_max_message_bytes_is_refused_on_every_front(
    server: ServerProcess, front: str
) -> None:
    FRONTS[front](server)

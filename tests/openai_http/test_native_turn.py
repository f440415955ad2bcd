"""A turn through /v1 (and /v1/messages) is a native StreamChat call like any other,
though made in the server's own process: the guard's rpc and audit lines and its
metrics, the caller's trace, a client that goes away mid-answer cancelling it (the
partial answer stored), and the server's stop ending it when its grace ends (the client
told, in the stream)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb
from contextd.v1 import sessions_pb2_grpc
from prometheus_client.samples import Sample

from tests.openai_http.conftest import MODEL, openai_args
from tests.support.auth import key_id
from tests.support.fake_openai_model import RuleModel, rule_model
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.grpc_web import web_address
from tests.support.keyed_server import KeyedServer, keyed_server
from tests.support.metrics_scrape import scrape, scrape_until, value
from tests.support.sdk import free_port
from tests.support.server import ServerProcess, start_server

CHAT = "/contextd.v1.ChatService/StreamChat"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


@dataclass(frozen=True)
class Counted:
    server: KeyedServer
    model: RuleModel

    @property
    def web(self) -> str:
        return f"http://{web_address(self.server.proc)}"


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Counted]:
    with (
        rule_model() as model,
        keyed_server(
            tmp_path_factory.mktemp("native-turn"),
            *openai_args(model),
            *("--anthropic-api", "--metrics-port", str(free_port())),
        ) as server,
    ):
        yield Counted(server, model)


def chat_lines(proc: ServerProcess, msg: str, user: str) -> list[dict[str, object]]:
    return proc.wait_for_logs(msg, lambda e: e.get("method") == CHAT and e.get("user") == user)


def sse_texts(lines: list[str]) -> list[str]:
    """The content of each chat completion chunk among server-sent event lines."""
    texts = []
    for line in lines:
        if line.startswith("data: {"):
            for choice in json.loads(line[6:]).get("choices", ()):
                texts.append(choice["delta"].get("content") or "")
    return texts


def test_a_turn_is_logged_audited_counted_and_traced_as_a_native_call(counted: Counted) -> None:
    proc = counted.server.proc
    before = scrape(proc)
    response = httpx.post(
        f"{counted.web}/v1/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "stream": True},
        headers={
            "Authorization": f"Bearer {counted.server.alice}",
            "traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01",
            "X-Contextd-Session": "new",  # stored: the audit line names the session made
        },
        timeout=30,
    )
    assert response.status_code == 200, response.text
    assert "".join(sse_texts(response.text.splitlines())) == "fake answer to: hello"

    [rpc] = chat_lines(proc, "rpc", "alice")
    assert rpc["code"] == "OK" and rpc["credential"] == key_id(counted.server.alice)
    assert rpc["trace_id"] == TRACE_ID  # the caller's trace, passed on as on the channel
    [audit] = chat_lines(proc, "audit", "alice")
    assert audit["code"] == "OK" and audit["credential"] == key_id(counted.server.alice)
    returned = audit["returned"]
    assert isinstance(returned, dict)
    assert returned["turn_started.session_id"] == rpc_session(response)

    def grew(samples: list[Sample], name: str, **labels: str) -> float:
        return value(samples, name, **labels) - value(before, name, **labels)

    after = scrape_until(
        proc,
        lambda s: grew(s, "grpc_server_handled_total", grpc_method="StreamChat") >= 1,
    )
    assert grew(after, "grpc_server_started_total", grpc_method="StreamChat") == 1
    assert grew(after, "grpc_server_handled_total", grpc_method="StreamChat", grpc_code="OK") == 1
    assert grew(after, "contextd_web_requests_total", protocol="openai", grpc_code="OK") == 1


def rpc_session(response: httpx.Response) -> str:
    first = next(line for line in response.text.splitlines() if line.startswith("data: {"))
    return str(json.loads(first[6:])["contextd"]["session_id"])


def test_a_refused_turn_is_counted_with_its_status(counted: Counted) -> None:
    proc = counted.server.proc
    response = httpx.post(
        f"{counted.web}/v1/messages",
        json={"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]},
        headers={
            "x-api-key": counted.server.bob,
            "anthropic-version": "2023-06-01",
            "X-Contextd-Session": "0" * 32,  # no such session: refused by the app
        },
        timeout=30,
    )
    assert response.status_code == 404, response.text
    assert response.json()["error"]["type"] == "not_found_error"
    [rpc] = chat_lines(proc, "rpc", "bob")
    assert rpc["code"] == "NOT_FOUND"
    [audit] = chat_lines(proc, "audit", "bob")
    assert audit["code"] == "NOT_FOUND"
    assert audit["resources"] == {"session.session_id": "0" * 32}


def test_going_away_mid_answer_cancels_the_turn_and_keeps_its_start(counted: Counted) -> None:
    proc = counted.server.proc
    seen = len(counted.model.disconnects)
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST",
            f"{counted.web}/v1/chat/completions",
            json={
                "model": MODEL,
                "messages": [{"role": "user", "content": "slow story"}],
                "stream": True,
            },
            headers={
                "Authorization": f"Bearer {counted.server.bob}",
                "X-Contextd-Session": "new",
            },
        ) as response,
    ):
        lines = response.iter_lines()
        read: list[str] = []
        while not [t for t in sse_texts(read) if t]:
            read.append(next(lines))
        session_id = json.loads(read[0][6:])["contextd"]["session_id"]
    # The client has gone: the turn ends as cancelled, with what was said stored.
    [rpc] = proc.wait_for_logs(
        "rpc", lambda e: e.get("method") == CHAT and e.get("code") == "CANCELLED"
    )
    assert rpc["user"] == "bob"
    stored = counted_messages(counted, session_id)
    assert [(m["role"], m["status"]) for m in stored] == [("user", ""), ("assistant", "cancelled")]
    assert stored[1]["content"].startswith("w0 ")
    deadline = time.monotonic() + 5
    while len(counted.model.disconnects) == seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(counted.model.disconnects) == seen + 1  # the model's stream was closed too


def counted_messages(counted: Counted, session_id: str) -> list[dict[str, str]]:
    """Bob's session's stored messages, read on the native port."""
    with grpc.insecure_channel(counted.server.address) as channel:
        stub = sessions_pb2_grpc.SessionServiceStub(channel)
        reply = stub.ListMessages(
            spb.ListMessagesRequest(session_id=session_id, page_size=50),
            metadata=(("authorization", f"Bearer {counted.server.bob}"),),
        )
    return [
        {
            "role": pb.Role.Name(m.message.role).removeprefix("ROLE_").lower(),
            "status": m.status,
            "content": m.message.content,
        }
        for m in reply.messages
    ]


def test_the_stop_cancels_a_turn_left_running_when_the_grace_ends(tmp_path: Path) -> None:
    with rule_model() as model:
        proc = start_server(
            tmp_path,
            *("--web-port", "0", "--openai-api", "--provider", "openai"),
            *("--provider-base-url", model.url, "--provider-model", MODEL),
            *("--shutdown-grace", "0.3", "--drain-delay", "0"),
            env={"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
        )
        try:
            with (
                httpx.Client(timeout=30) as client,
                client.stream(
                    "POST",
                    f"http://{web_address(proc)}/v1/chat/completions",
                    json={
                        "model": MODEL,
                        "messages": [{"role": "user", "content": "slow and long"}],
                        "stream": True,
                        "user": "carol",
                    },
                ) as response,
            ):
                lines = response.iter_lines()
                read: list[str] = []
                while not [t for t in sse_texts(read) if t]:
                    read.append(next(lines))
                stopping = time.monotonic()
                proc.process.terminate()
                read.extend(lines)
        finally:
            assert proc.stop() == 0
        # The answer takes 2 s; the grace, 0.3 s: the turn was cancelled, not waited for,
        # and the stream ends with the error event the SDKs raise.
        assert time.monotonic() - stopping < 1.9
        assert "data: [DONE]" not in read
        errors = [json.loads(line[6:]) for line in read if line.startswith('data: {"error"')]
        assert [e["error"]["code"] for e in errors] == ["cancelled"]
        [rpc] = [e for e in proc.logs("rpc") if e.get("method") == CHAT]
        assert rpc["code"] == "CANCELLED"

"""Server behaviour through raw generated stubs: errors, limits, logging, shutdown."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from contextd.app.context import ContextApp
from contextd.config import Settings
from contextd.root import server as contextd_server
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc as pb_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.server import ServerProcess, start_server
from tests.support.status import violations


@pytest.fixture(scope="module")
def stub(address: str) -> Iterator[pb_grpc.ContextServiceStub]:
    with grpc.insecure_channel(address) as channel:
        yield pb_grpc.ContextServiceStub(channel)


def ok_request(**changes: Any) -> pb.BuildMessagesRequest:
    request = pb.BuildMessagesRequest(
        system_prompts=["sys"],
        history=[pb.Message(role=pb.ROLE_USER, content="hi")],
        user_message="hello",
        token_budget=100,
    )
    for name, value in changes.items():
        if isinstance(value, list):
            request.ClearField(name)  # type: ignore[arg-type]
            getattr(request, name).extend(value)
        else:
            setattr(request, name, value)
    return request


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"history": [pb.Message(role=pb.ROLE_UNSPECIFIED, content="x")]}, "history[0].role"),
        ({"history": [pb.Message(role=99, content="x")]}, "history[0].role"),
        ({"output_format": 42}, "output_format"),
        ({"overflow_policy": 7}, "overflow_policy"),
        ({"tokenizer": "nope"}, "tokenizer"),
    ],
)
def test_enum_and_name_errors(
    stub: pb_grpc.ContextServiceStub, changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(grpc.RpcError) as err:
        stub.BuildMessages(ok_request(**changes))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violations(err.value) == [field]


def test_count_tokens_names_bad_message_role(stub: pb_grpc.ContextServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as err:
        stub.CountTokens(pb.CountTokensRequest(messages=[pb.Message(content="x")]))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violations(err.value) == ["messages[0].role"]


def test_assemble_prompt_blank_identity(stub: pb_grpc.ContextServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as err:
        stub.AssemblePrompt(pb.AssemblePromptRequest(layers=pb.PromptLayers(rules="r")))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violations(err.value) == ["layers.identity"]


def test_budget_overflow_can_fail(stub: pb_grpc.ContextServiceStub) -> None:
    request = ok_request(token_budget=2, overflow_policy=pb.OVERFLOW_POLICY_FAIL)
    with pytest.raises(grpc.RpcError) as err:
        stub.BuildMessages(request)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "exceed token_budget 2" in (err.value.details() or "")


def test_missing_encoding_says_how_to_add_it(stub: pb_grpc.ContextServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as err:
        stub.CountTokens(pb.CountTokensRequest(tokenizer="o200k_base", texts=["x"]))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "TIKTOKEN_CACHE_DIR" in (err.value.details() or "")


def test_one_log_line_per_rpc(server: ServerProcess, stub: pb_grpc.ContextServiceStub) -> None:
    before = -1
    while before != len(server.logs("rpc")):  # let lines of earlier calls arrive first
        before = len(server.logs("rpc"))
        time.sleep(0.2)
    stub.ListTokenizers(pb.ListTokenizersRequest())
    with pytest.raises(grpc.RpcError):
        stub.BuildMessages(pb.BuildMessagesRequest())
    deadline = time.monotonic() + 5  # the server logs after the reply is sent
    while len(server.logs("rpc")) < before + 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    lines = server.logs("rpc")[before:]
    assert [(x["method"], x["code"]) for x in lines] == [
        ("/contextd.v1.ContextService/ListTokenizers", "OK"),
        ("/contextd.v1.ContextService/BuildMessages", "INVALID_ARGUMENT"),
    ]
    assert all(isinstance(x["ms"], float) for x in lines)


def test_message_size_limit(tmp_path: Path) -> None:
    proc = start_server(tmp_path, "--max-message-bytes", "2048")
    try:
        with grpc.insecure_channel(proc.address) as channel:
            stub = pb_grpc.ContextServiceStub(channel)
            stub.CountTokens(pb.CountTokensRequest(texts=["x" * 1000]))
            with pytest.raises(grpc.RpcError) as err:
                stub.CountTokens(pb.CountTokensRequest(texts=["x" * 4000]))
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        assert proc.stop() == 0


def test_sigterm_reports_not_serving_then_exits(tmp_path: Path) -> None:
    proc = start_server(tmp_path, "--shutdown-grace", "2")
    statuses: list[int] = []
    with grpc.insecure_channel(proc.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        watch = health.Watch(health_pb2.HealthCheckRequest(service=""))

        def follow() -> None:
            try:
                for update in watch:
                    statuses.append(update.status)
            except grpc.RpcError:
                pass

        reader = threading.Thread(target=follow)
        reader.start()
        deadline = time.monotonic() + 10
        while not statuses and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.stop(signal.SIGTERM) == 0
        reader.join(10)
    assert statuses[0] == health_pb2.HealthCheckResponse.SERVING
    assert health_pb2.HealthCheckResponse.NOT_SERVING in statuses
    assert [x["msg"] for x in proc.logs() if x["msg"] in ("shutting down", "stopped")] == [
        "shutting down",
        "stopped",
    ]


async def _boom_stream(request: bytes, context: Any) -> AsyncIterator[bytes]:
    yield b"first"
    raise RuntimeError("bug in a streaming handler")


async def test_unexpected_errors_become_internal_never_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(ContextApp, "count_tokens", broken)
    streaming = grpc.method_handlers_generic_handler(
        "test.Boom", {"Stream": grpc.unary_stream_rpc_method_handler(_boom_stream)}
    )
    running = await contextd_server.start(
        Settings(port=0, data_dir=tmp_path), extra_handlers=[streaming]
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = pb_grpc.ContextServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.CountTokens(pb.CountTokensRequest(texts=["x"]))
            assert err.value.code() == grpc.StatusCode.INTERNAL
            assert "incident" in (err.value.details() or "")

            call = channel.unary_stream("/test.Boom/Stream")(b"")
            received = []
            with pytest.raises(grpc.aio.AioRpcError) as stream_err:
                async for item in call:
                    received.append(item)
            assert received == [b"first"]
            assert stream_err.value.code() == grpc.StatusCode.INTERNAL
    finally:
        await running.stop(0)


def test_health_command(server: ServerProcess) -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "contextd", "health", "--address", server.address],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and "SERVING" in ok.stdout
    down = subprocess.run(
        [sys.executable, "-m", "contextd", "health", "--address", "127.0.0.1:9", "--timeout", "1"],
        capture_output=True,
        text=True,
    )
    assert down.returncode == 1 and "UNAVAILABLE" in down.stderr


def test_every_bad_field_is_named_at_once(stub: pb_grpc.ContextServiceStub) -> None:
    request = ok_request(
        tokenizer="gpt-17",
        token_budget=0,
        history=[pb.Message(role=42, content="x"), pb.Message(role=pb.ROLE_TOOL, content="r")],
    )
    with pytest.raises(grpc.RpcError) as err:
        stub.BuildMessages(request)
    assert violations(err.value) == [
        "tokenizer",
        "history[0].role",
        "token_budget",
        "history[1].tool_call_id",
    ]


def test_one_server_per_data_dir(tmp_path: Path) -> None:
    # The store trusts what it cached because it is the only writer: a second server on
    # the same directory must refuse to start, with a message that says why.
    first = start_server(tmp_path)
    try:
        second = subprocess.run(
            [sys.executable, "-m", "contextd", "serve", "--port", "0", "--data-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode != 0
        assert f"another contextd (pid {first.process.pid})" in second.stderr
        assert "--data-dir" in second.stderr
        # The first one is untouched by the attempt.
        with grpc.insecure_channel(first.address) as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
            assert health.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(30)
    # A killed server leaves no lock behind: the next one starts on the same directory.
    again = start_server(tmp_path)
    again.stop()


@pytest.mark.parametrize("taken", ["port", "web_port"])
async def test_a_failed_start_undoes_what_it_started(tmp_path: Path, taken: str) -> None:
    """A port already in use fails the start, and the data directory is free again:
    lock released, database closed, native server stopped."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        ports = {"port": 0, "web_port": 0, taken: busy.getsockname()[1]}
        with pytest.raises(SystemExit, match="cannot listen"):
            await contextd_server.start(Settings(data_dir=tmp_path, **ports))
    again = await contextd_server.start(Settings(port=0, data_dir=tmp_path))
    await again.stop(0)

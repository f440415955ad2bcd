"""Any request to any RPC, on both ports, ends with a status a client can act on: never
UNKNOWN or INTERNAL. Requests come from the descriptors (tests/support/fuzz.py) and as
raw bytes; a fixed number of examples per RPC keeps the run short."""

from __future__ import annotations

import http.client
from collections.abc import Iterator

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.auth import Rpc, every_rpc
from tests.support.fuzz import requests
from tests.support.grpc_web import frame, parse_body, request_headers, web_address
from tests.support.server import ServerProcess, start_server

UNARY_REQUESTS = [rpc for rpc in every_rpc() if not rpc.method.client_streaming]
BAD = {grpc.StatusCode.UNKNOWN.value[0], grpc.StatusCode.INTERNAL.value[0]}
EXAMPLES = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,  # the same examples on every run: CI is never flaky on this
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

WEB_EXAMPLES = settings(EXAMPLES, max_examples=5)


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_server(tmp_path_factory.mktemp("fuzz"), "--web-port", "0")
    yield server
    assert server.stop() == 0
    errors = [e for e in server.log_lines if e.get("level") == "ERROR"]
    assert errors == []


@pytest.fixture(scope="module")
def channel(proc: ServerProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(proc.address) as channel:
        yield channel


def native_code(channel: grpc.Channel, rpc: Rpc, data: bytes) -> int:
    path = "/" + rpc.path
    try:
        if rpc.method.server_streaming:
            stream = channel.unary_stream(path, _raw, _raw)
            for _ in stream(data, timeout=15):
                pass
        else:
            channel.unary_unary(path, _raw, _raw)(data, timeout=15)
    except grpc.RpcError as error:
        code: grpc.StatusCode = error.code()
        return int(code.value[0])
    return 0


@pytest.mark.parametrize("rpc", UNARY_REQUESTS, ids=str)
def test_any_request_message(channel: grpc.Channel, rpc: Rpc) -> None:
    @EXAMPLES
    @given(requests(rpc.method.input_type))
    def check(request: object) -> None:
        data = request.SerializeToString()  # type: ignore[attr-defined]
        assert native_code(channel, rpc, data) not in BAD, request

    check()


@pytest.mark.parametrize("rpc", UNARY_REQUESTS, ids=str)
def test_any_bytes(channel: grpc.Channel, rpc: Rpc) -> None:
    @EXAMPLES
    @given(st.binary(max_size=300))
    def check(data: bytes) -> None:
        assert native_code(channel, rpc, data) not in BAD, data

    check()


@pytest.mark.parametrize("rpc", UNARY_REQUESTS, ids=str)
def test_any_request_on_the_web_port(proc: ServerProcess, rpc: Rpc) -> None:
    host, port = web_address(proc).rsplit(":", 1)

    @WEB_EXAMPLES
    @given(requests(rpc.method.input_type).map(lambda m: m.SerializeToString()) | st.binary())
    def check(data: bytes) -> None:
        connection = http.client.HTTPConnection(host, int(port), timeout=15)
        try:
            connection.request("POST", "/" + rpc.path, frame(data), request_headers())
            response = connection.getresponse()
            assert response.status == 200
            _, trailers = parse_body(response.read(), text=False)
        finally:
            connection.close()
        assert int(trailers["grpc-status"]) not in BAD, data

    check()


def _raw(data: bytes) -> bytes:
    return data

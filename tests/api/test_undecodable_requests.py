"""Bytes that are not a valid request message end as INVALID_ARGUMENT on every RPC of
both ports, with the call's ordinary `rpc` log line, never as UNKNOWN."""

from __future__ import annotations

from collections.abc import Iterator

import aiohttp
import grpc
import pytest

from tests.support.auth import Rpc, every_rpc
from tests.support.grpc_web import frame, method_url, parse_body, request_headers, web_address
from tests.support.server import ServerProcess, start_server

# Not a message: a tag with a varint that never ends; a length past the end; a string
# field holding bytes that are not UTF-8.
GARBAGE = [b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", b"\x0a\x05ab", b"\x0a\x02\xff\xfe"]
UNARY_REQUESTS = [rpc for rpc in every_rpc() if not rpc.method.client_streaming]


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_server(tmp_path_factory.mktemp("undecodable"), "--web-port", "0")
    yield server
    assert server.stop() == 0
    assert not [e for e in server.log_lines if e.get("level") == "ERROR"]


def _native_code(address: str, rpc: Rpc, data: bytes) -> grpc.StatusCode:
    with grpc.insecure_channel(address) as channel:
        path = "/" + rpc.path
        if rpc.method.server_streaming:
            stream = channel.unary_stream(path, lambda b: b, lambda b: b)
            call = lambda: list(stream(data, timeout=10))  # noqa: E731
        else:
            unary = channel.unary_unary(path, lambda b: b, lambda b: b)
            call = lambda: unary(data, timeout=10)  # noqa: E731
        try:
            call()
        except grpc.RpcError as error:
            return error.code()
    return grpc.StatusCode.OK


@pytest.mark.parametrize("rpc", UNARY_REQUESTS, ids=str)
def test_native_garbage_is_invalid_argument(proc: ServerProcess, rpc: Rpc) -> None:
    for data in GARBAGE:
        if data == GARBAGE[2] and not _first_field_is_text(rpc):
            continue  # those bytes may be a valid message of this type
        assert _native_code(proc.address, rpc, data) == grpc.StatusCode.INVALID_ARGUMENT
    lines = proc.wait_for_logs("rpc", lambda e: e.get("method") == "/" + rpc.path)
    assert lines and lines[-1]["code"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize("rpc", UNARY_REQUESTS, ids=str)
async def test_web_garbage_is_invalid_argument(proc: ServerProcess, rpc: Rpc) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            method_url(web_address(proc), rpc.path),
            data=frame(GARBAGE[0]),
            headers=request_headers(),
        ) as response,
    ):
        assert response.status == 200
        _, trailers = parse_body(await response.read(), text=False)
    assert trailers["grpc-status"] == str(grpc.StatusCode.INVALID_ARGUMENT.value[0])
    assert "not a valid" in trailers["grpc-message"]


def test_the_server_still_serves(proc: ServerProcess) -> None:
    valid = next(r for r in UNARY_REQUESTS if r.path.endswith("/ListTokenizers"))
    data = valid.request().SerializeToString()
    assert _native_code(proc.address, valid, data) == grpc.StatusCode.OK


def _first_field_is_text(rpc: Rpc) -> bool:
    fields = rpc.method.input_type.fields_by_number
    return 1 in fields and fields[1].type == fields[1].TYPE_STRING

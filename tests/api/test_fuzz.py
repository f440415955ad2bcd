"""Any request to any RPC, on both ports, ends with a status a client can act on, never
UNKNOWN or INTERNAL, and a refused call changes nothing stored (every row, every event
log). Requests come from the descriptors (tests/support/fuzz.py): any message, mutations
of a valid one that names the user's stored resources (tests/support/fuzz_cases.py,
which must hold a case for every RPC the descriptors list), and raw bytes; on the web
port as gRPC-Web frames and as Connect JSON. A fixed number of examples per RPC keeps
the run short, and the same examples run every time."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import sessions_pb2 as spb
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import stored_state
from tests.support.auth import Rpc, StoredIds, every_rpc
from tests.support.fuzz import JSON_VALUES, json_like, mutations, requests
from tests.support.fuzz_cases import CASES
from tests.support.grpc_web import frame, parse_body, request_headers, web_address
from tests.support.server import ServerProcess, start_server

RPCS = list(every_rpc())
OK = grpc.StatusCode.OK.value[0]
BAD = {grpc.StatusCode.UNKNOWN.value[0], grpc.StatusCode.INTERNAL.value[0]}
USER = "fuzz-user"
EXAMPLES = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,  # the same examples on every run: CI is never flaky on this
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
WEB_EXAMPLES = settings(EXAMPLES, max_examples=5)


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    # No memory work after turns: what is stored changes only with the calls themselves.
    server = start_server(
        tmp_path_factory.mktemp("fuzz"), "--web-port", "0", "--memory-enabled", "false"
    )
    yield server
    assert server.stop() == 0
    errors = [e for e in server.log_lines if e.get("level") == "ERROR"]
    assert errors == []


@pytest.fixture(scope="module")
def channel(proc: ServerProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(proc.address) as channel:
        yield channel


@pytest.fixture
def stored(channel: grpc.Channel) -> StoredIds:
    """A session of the fuzz user with a question and its answer, and a memory: fresh for
    each test, as the calls of the last one may have deleted them."""
    sessions = sessions_pb2_grpc.SessionServiceStub(channel)
    sid = sessions.CreateSession(spb.CreateSessionRequest(user_id=USER)).session.id
    appended = sessions.AppendMessages(
        spb.AppendMessagesRequest(
            user_id=USER,
            session_id=sid,
            messages=[
                pb.Message(role=pb.ROLE_USER, content="Which train?"),
                pb.Message(role=pb.ROLE_ASSISTANT, content="The 8:15."),
            ],
        )
    )
    memory = memory_pb2_grpc.MemoryServiceStub(channel).AddMemory(
        mpb.AddMemoryRequest(user_id=USER, content="I take the train.")
    )
    return StoredIds(sid, appended.messages[1].message.id, memory.memory.id)


def test_every_rpc_has_a_fuzz_case() -> None:
    """An RPC added later gets fuzzed only once it has a case: this fails until then."""
    assert {rpc.path for rpc in RPCS} == set(CASES)
    assert not any(rpc.method.client_streaming for rpc in RPCS), "a streamed request: fuzz it"


def native_code(channel: grpc.Channel, rpc: Rpc, data: bytes) -> int:
    path = "/" + rpc.path
    try:
        if rpc.method.server_streaming:
            stream = channel.unary_stream(path, _raw, _raw)
            for _ in stream(data, timeout=30):
                pass
        else:
            channel.unary_unary(path, _raw, _raw)(data, timeout=30)
    except grpc.RpcError as error:
        code: grpc.StatusCode = error.code()
        return int(code.value[0])
    return OK


def checked(proc: ServerProcess, call: Callable[[], int], refused: Callable[[int], bool]) -> None:
    """``call`` (its outcome: a gRPC code or an HTTP status) fails for no fault of the
    server's own, and changes nothing stored when ``refused`` says it was refused."""
    stored_state.checked(proc.data_dir, call, refused)


def native_refused(code: int) -> bool:
    assert code not in BAD, code
    return code != OK


@pytest.mark.parametrize("rpc", RPCS, ids=str)
def test_any_request_message(proc: ServerProcess, channel: grpc.Channel, rpc: Rpc) -> None:
    @EXAMPLES
    @given(requests(rpc.method.input_type))
    def check(request: Any) -> None:
        data = request.SerializeToString()
        checked(proc, lambda: native_code(channel, rpc, data), native_refused)

    check()


@pytest.mark.parametrize("rpc", RPCS, ids=str)
def test_any_change_to_a_valid_request(
    proc: ServerProcess, channel: grpc.Channel, stored: StoredIds, rpc: Rpc
) -> None:
    seed = CASES[rpc.path](rpc, stored, USER)

    @EXAMPLES
    @given(mutations(seed))
    def check(request: Any) -> None:
        data = request.SerializeToString()
        checked(proc, lambda: native_code(channel, rpc, data), native_refused)

    check()


@pytest.mark.parametrize("rpc", RPCS, ids=str)
def test_any_bytes(proc: ServerProcess, channel: grpc.Channel, rpc: Rpc) -> None:
    @EXAMPLES
    @given(st.binary(max_size=300))
    def check(data: bytes) -> None:
        checked(proc, lambda: native_code(channel, rpc, data), native_refused)

    check()


def web_call(proc: ServerProcess, path: str, body: bytes, headers: dict[str, str]) -> Any:
    host, port = web_address(proc).rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("POST", path, body, headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("rpc", RPCS, ids=str)
def test_any_request_on_the_web_port(proc: ServerProcess, stored: StoredIds, rpc: Rpc) -> None:
    seed = CASES[rpc.path](rpc, stored, USER)
    anything = requests(rpc.method.input_type) | mutations(seed)

    @WEB_EXAMPLES
    @given(anything.map(lambda m: m.SerializeToString()) | st.binary())
    def check(data: bytes) -> None:
        def call() -> int:
            status, _, body = web_call(proc, "/" + rpc.path, frame(data), request_headers())
            assert status == 200
            _, trailers = parse_body(body, text=False)
            return int(trailers["grpc-status"])

        checked(proc, call, native_refused)

    check()


CONNECT_CODES = {"unknown", "internal"}


@pytest.mark.parametrize("rpc", [r for r in RPCS if not r.method.server_streaming], ids=str)
def test_any_connect_json_on_the_web_port(proc: ServerProcess, stored: StoredIds, rpc: Rpc) -> None:
    """Connect's unary JSON: any object shaped like a valid request, any JSON at all."""
    seed = json_format.MessageToDict(CASES[rpc.path](rpc, stored, USER))

    @WEB_EXAMPLES
    @given(json_like(seed) | JSON_VALUES)
    def check(body: Any) -> None:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Connect-Protocol-Version": "1"}

        def call() -> int:
            status, _, answer = web_call(proc, "/" + rpc.path, data, headers)
            assert status < 500 or status in (503, 504), (status, answer)
            if status != 200:
                assert json.loads(answer)["code"] not in CONNECT_CODES, answer
            return int(status)

        checked(proc, call, lambda status: status != 200)

    check()


def _raw(data: bytes) -> bytes:
    return data

"""The Python SDK against a fake synchronous server that answers with crafted statuses.

The real server never sends most of these (unknown enum numbers, broken payload JSON,
unrelated status details), so they are served by a small ContextServiceServicer over a
real gRPC port, set up by the pytest-grpc plugin: this module defines
``grpc_add_to_server``, ``grpc_servicer`` and ``grpc_stub_cls``; the plugin provides
``grpc_addr``, ``grpc_server``, ``grpc_channel`` and ``grpc_stub``.
"""

from __future__ import annotations

import json
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import grpc.aio
import pytest
from contextd_client import (
    AsyncContextClient,
    ContextClient,
    ContextdError,
    DroppedRange,
    FieldViolation,
    InvalidResponseError,
    pb,
    pb_grpc,
)
from google.protobuf import any_pb2
from google.protobuf.message import Message as ProtoMessage
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

# Read by pytest-grpc: one call may still be finishing while the next test starts.
grpc_max_workers = 4

Reply = Callable[[Any, grpc.ServicerContext], Any]


class FakeContextService(pb_grpc.ContextServiceServicer):
    """Answers each of the SDK's four calls with whatever the running test put in ``reply``."""

    def __init__(self) -> None:
        self.reply: Reply | None = None
        self.requests: list[Any] = []
        self.lock = threading.Lock()

    def _answer(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self.lock:
            self.requests.append(request)
            reply = self.reply
        if reply is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "the test set no reply")
        return reply(request, context)

    def AssemblePrompt(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._answer(request, context)

    def BuildMessages(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._answer(request, context)

    def CountTokens(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._answer(request, context)

    def ListTokenizers(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._answer(request, context)


@pytest.fixture(scope="module")
def grpc_add_to_server() -> Callable[[Any, grpc.Server], None]:
    return pb_grpc.add_ContextServiceServicer_to_server


@pytest.fixture(scope="module")
def grpc_servicer() -> FakeContextService:
    return FakeContextService()


@pytest.fixture(scope="module")
def grpc_stub_cls() -> type[pb_grpc.ContextServiceStub]:
    return pb_grpc.ContextServiceStub


@pytest.fixture(scope="module", autouse=True)
def _real_grpc_server_only(request: pytest.FixtureRequest) -> None:
    # Autouse, so it runs before the plugin's module fixtures start the server. Its
    # in-process fake (--grpc-fake-server) cannot register today's generated handlers
    # and has no status details, trailers or deadlines.
    if request.config.getoption("grpc-fake"):
        pytest.skip("needs a real gRPC server, not --grpc-fake-server")


@pytest.fixture
def fake(grpc_servicer: FakeContextService) -> Iterator[FakeContextService]:
    """The module's servicer, with no reply and no recorded request before each test."""
    grpc_servicer.reply = None
    grpc_servicer.requests.clear()
    yield grpc_servicer
    grpc_servicer.reply = None


@pytest.fixture
def client(grpc_channel: grpc.Channel) -> Iterator[ContextClient]:
    with ContextClient(channel=grpc_channel, timeout=10) as c:
        yield c


def packed(*details: ProtoMessage) -> list[any_pb2.Any]:
    out = []
    for detail in details:
        item = any_pb2.Any()
        item.Pack(detail)
        out.append(item)
    return out


def abort_with(code: grpc.StatusCode, message: str, *details: ProtoMessage) -> Reply:
    """A reply that fails the call with a rich google.rpc.Status carrying ``details``."""
    status = status_pb2.Status(code=code.value[0], message=message, details=packed(*details))

    def reply(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort_with_status(rpc_status.to_status(status))

    return reply


def respond(response: ProtoMessage) -> Reply:
    return lambda request, context: response


def expect_error(call: Callable[[], object]) -> ContextdError:
    with pytest.raises(ContextdError) as info:
        call()
    return info.value


TWO_VIOLATIONS = error_details_pb2.BadRequest(
    field_violations=[
        error_details_pb2.BadRequest.FieldViolation(
            field="token_budget", description="must be a positive number of tokens"
        ),
        error_details_pb2.BadRequest.FieldViolation(
            field="history[3].tool_calls[0].id", description="must not be empty"
        ),
    ]
)
ERROR_INFO = error_details_pb2.ErrorInfo(
    reason="QUOTA_EXHAUSTED", domain="contextd.example", metadata={"tenant": "acme"}
)

# Every SDK call, as (name, call) for parametrized tests.
CALLS: list[tuple[str, Callable[[ContextClient], object]]] = [
    ("assemble_prompt", lambda c: c.assemble_prompt("You are Ada.")),
    ("build_messages", lambda c: c.build_messages("Hi", token_budget=100)),
    ("count_tokens", lambda c: c.count_tokens("hello")),
    ("list_tokenizers", lambda c: c.list_tokenizers()),
]


# Error statuses ---------------------------------------------------------------------


def test_bad_request_violations_decode_in_order(
    fake: FakeContextService, grpc_addr: str, grpc_server: grpc.Server
) -> None:
    fake.reply = abort_with(grpc.StatusCode.INVALID_ARGUMENT, "2 bad fields", TWO_VIOLATIONS)
    with ContextClient(grpc_addr, timeout=10) as client:
        error = expect_error(lambda: client.build_messages("Hi", token_budget=100))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.message == "2 bad fields"
    assert str(error) == "INVALID_ARGUMENT: 2 bad fields"
    assert error.violations == [
        FieldViolation("token_budget", "must be a positive number of tokens"),
        FieldViolation("history[3].tool_calls[0].id", "must not be empty"),
    ]
    assert error.fields == ["token_budget", "history[3].tool_calls[0].id"]
    assert error.status is not None
    assert error.status.code == code_pb2.INVALID_ARGUMENT
    assert error.status.message == "2 bad fields"
    assert isinstance(error.__cause__, grpc.RpcError)
    # The request reached the fake as the SDK encoded it.
    assert [r.user_message for r in fake.requests] == ["Hi"]


def test_status_matches_what_a_raw_stub_sees(
    fake: FakeContextService, client: ContextClient, grpc_stub: pb_grpc.ContextServiceStub
) -> None:
    fake.reply = abort_with(grpc.StatusCode.INVALID_ARGUMENT, "bad", TWO_VIOLATIONS)
    error = expect_error(lambda: client.count_tokens("x"))
    with pytest.raises(grpc.RpcError) as raw:
        grpc_stub.CountTokens(pb.CountTokensRequest(texts=["x"]), timeout=10)
    assert error.status == rpc_status.from_call(raw.value)  # type: ignore[arg-type]


def test_bad_request_is_found_among_other_details(
    fake: FakeContextService, client: ContextClient
) -> None:
    fake.reply = abort_with(
        grpc.StatusCode.INVALID_ARGUMENT, "bad", ERROR_INFO, TWO_VIOLATIONS, ERROR_INFO
    )
    error = expect_error(lambda: client.assemble_prompt("You are Ada."))
    assert error.fields == ["token_budget", "history[3].tool_calls[0].id"]
    assert error.status is not None and len(error.status.details) == 3


def test_unrelated_detail_gives_no_violations_but_keeps_status(
    fake: FakeContextService, client: ContextClient
) -> None:
    fake.reply = abort_with(grpc.StatusCode.RESOURCE_EXHAUSTED, "quota", ERROR_INFO)
    error = expect_error(lambda: client.build_messages("Hi", token_budget=100))
    assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.message == "quota"
    assert error.violations == [] and error.fields == []
    assert error.status is not None
    assert error.status.code == code_pb2.RESOURCE_EXHAUSTED
    [detail] = error.status.details
    assert detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)
    info = error_details_pb2.ErrorInfo()
    assert detail.Unpack(info)
    assert info == ERROR_INFO


def test_invalid_argument_without_details(fake: FakeContextService, client: ContextClient) -> None:
    fake.reply = abort_with(grpc.StatusCode.INVALID_ARGUMENT, "bad, no details")
    error = expect_error(lambda: client.count_tokens("x"))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.violations == []
    assert error.status is not None and list(error.status.details) == []


@pytest.mark.parametrize(("method", "call"), CALLS, ids=[name for name, _ in CALLS])
def test_plain_unavailable_on_every_call(
    fake: FakeContextService,
    client: ContextClient,
    method: str,
    call: Callable[[ContextClient], object],
) -> None:
    def reply(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAVAILABLE, "down for maintenance")

    fake.reply = reply
    error = expect_error(lambda: call(client))
    assert error.code == grpc.StatusCode.UNAVAILABLE
    assert error.message == "down for maintenance"
    assert error.violations == [] and error.fields == []
    assert error.status is None  # no google.rpc.Status trailer was sent
    assert isinstance(error.__cause__, grpc.RpcError)
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "trailer",
    [
        pytest.param(
            status_pb2.Status(code=code_pb2.NOT_FOUND, message="other").SerializeToString(),
            id="code-disagrees",
        ),
        pytest.param(b"\xff\xff not a status", id="garbage"),
    ],
)
def test_status_trailer_that_cannot_be_trusted_is_ignored(
    fake: FakeContextService, client: ContextClient, trailer: bytes
) -> None:
    def reply(request: Any, context: grpc.ServicerContext) -> Any:
        context.set_trailing_metadata((("grpc-status-details-bin", trailer),))
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad")

    fake.reply = reply
    error = expect_error(lambda: client.count_tokens("x"))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.message == "bad"
    assert error.status is None and error.violations == []


def test_deadline_exceeded_when_the_server_is_too_slow(
    fake: FakeContextService, grpc_channel: grpc.Channel
) -> None:
    remaining: list[float | None] = []

    def reply(request: Any, context: grpc.ServicerContext) -> Any:
        remaining.append(context.time_remaining())
        deadline = time.monotonic() + 10  # bounded even if the client never gives up
        while context.is_active() and time.monotonic() < deadline:
            time.sleep(0.01)
        return pb.ListTokenizersResponse(default_tokenizer="too late")

    fake.reply = reply
    with ContextClient(channel=grpc_channel, timeout=0.2) as slow:
        started = time.monotonic()
        error = expect_error(slow.list_tokenizers)
        elapsed = time.monotonic() - started
    assert error.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert error.violations == [] and error.status is None
    assert elapsed < 5
    # The client's timeout reached the server as the call's deadline.
    assert remaining and remaining[0] is not None and 0 < remaining[0] < 1


# Responses that cannot be decoded ----------------------------------------------------


@pytest.mark.parametrize(
    ("payload_json", "problem"),
    [
        ('{"messages": [', "is not valid JSON"),
        ("not json at all", "is not valid JSON"),
        ("{'single': 'quotes'}", "is not valid JSON"),
        ("[1, 2]", "is not a JSON object but a JSON array"),
        ('"text"', "is not a JSON object but a JSON string"),
        ("null", "is not a JSON object but a JSON null"),
        ("42", "is not a JSON object but a JSON number"),
    ],
)
def test_payload_json_that_is_not_a_json_object(
    fake: FakeContextService, client: ContextClient, payload_json: str, problem: str
) -> None:
    fake.reply = respond(
        pb.BuildMessagesResponse(
            messages=[pb.Message(role=pb.ROLE_USER, content="Hi", tokens=1)],
            payload_json=payload_json,
        )
    )
    with pytest.raises(InvalidResponseError) as info:
        client.build_messages("Hi", token_budget=100, output_format="openai")
    error = info.value
    assert isinstance(error, ContextdError) and isinstance(error, ValueError)
    assert error.code == grpc.StatusCode.INTERNAL
    assert error.message.startswith(f"BuildMessagesResponse.payload_json {problem}")
    assert str(error) == f"INTERNAL: {error.message}"
    assert error.violations == [] and error.status is None
    if "not valid JSON" in problem:
        assert isinstance(error.__cause__, json.JSONDecodeError)
        assert str(error.__cause__) in error.message  # says where the JSON breaks


def test_invalid_response_error_pickles() -> None:
    error = InvalidResponseError("BuildMessagesResponse.payload_json is not valid JSON")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is InvalidResponseError
    assert (copy.code, copy.message) == (grpc.StatusCode.INTERNAL, error.message)


def test_empty_payload_json_is_none(fake: FakeContextService, client: ContextClient) -> None:
    fake.reply = respond(pb.BuildMessagesResponse(payload_json=""))
    assert client.build_messages("Hi", token_budget=100).payload is None


# Enum numbers from a newer server ---------------------------------------------------

FUTURE_RESPONSE = pb.BuildMessagesResponse(
    messages=[
        pb.Message(role=pb.ROLE_SYSTEM, content="Be brief.", tokens=3),
        pb.Message(role=42, content="from the future", id="f1", tokens=4),  # type: ignore[arg-type]
        pb.Message(role=pb.ROLE_UNSPECIFIED, content="unspecified", tokens=3),
        pb.Message(role=pb.ROLE_USER, content="Hi", tokens=1),
    ],
    report=pb.BuildReport(
        tokenizer="estimate",
        token_budget=100,
        total_tokens=11,
        history_kept=2,
        dropped=[
            pb.DroppedRange(start_index=0, count=2, reason=99),  # type: ignore[arg-type]
            pb.DroppedRange(start_index=2, count=1, reason=pb.DROP_REASON_UNSPECIFIED),
            pb.DroppedRange(start_index=3, count=1, reason=pb.DROP_REASON_BUDGET),
        ],
    ),
)


def test_unknown_enum_numbers_do_not_crash(fake: FakeContextService, client: ContextClient) -> None:
    fake.reply = respond(FUTURE_RESPONSE)
    result = client.build_messages("Hi", token_budget=100)
    assert [m["role"] for m in result.messages] == ["system", "unknown(42)", "unspecified", "user"]
    assert result.messages[1] == {
        "role": "unknown(42)",
        "content": "from the future",
        "id": "f1",
        "tokens": 4,
    }
    assert result.report.dropped == [
        DroppedRange(0, 2, "unknown(99)"),
        DroppedRange(2, 1, "unspecified"),
        DroppedRange(3, 1, "budget"),
    ]
    assert [i for r in result.report.dropped for i in r.indices] == [0, 1, 2, 3]
    assert result.report.history_kept == 2


def test_unknown_role_goes_back_as_its_number(
    fake: FakeContextService, client: ContextClient
) -> None:
    fake.reply = respond(FUTURE_RESPONSE)
    first = client.build_messages("Hi", token_budget=100)
    client.build_messages("Again", history=first.messages[:-1], token_budget=100)
    sent = fake.requests[-1].history
    assert [m.role for m in sent] == [pb.ROLE_SYSTEM, 42, pb.ROLE_UNSPECIFIED]
    assert sent[1].content == "from the future" and sent[1].id == "f1"
    # Only the exact "unknown(N)" form maps back; other unknown names stay unspecified.
    client.count_tokens(
        messages=[
            {"role": "unknown(7)", "content": "a"},
            {"role": "Unknown(7)", "content": "b"},
            {"role": "unknown(7) ", "content": "c"},
            {"role": "unknown(99999999999)", "content": "d"},
            {"role": "unknown()", "content": "e"},
        ]
    )
    assert [m.role for m in fake.requests[-1].messages] == [7, 0, 0, 0, 0]


# The asyncio client against the same fake ------------------------------------------


async def test_async_client_decodes_the_same(
    fake: FakeContextService, grpc_addr: str, grpc_server: grpc.Server
) -> None:
    async with AsyncContextClient(grpc_addr, timeout=10) as aclient:
        fake.reply = abort_with(grpc.StatusCode.INVALID_ARGUMENT, "bad", ERROR_INFO, TWO_VIOLATIONS)
        with pytest.raises(ContextdError) as info:
            await aclient.build_messages("Hi", token_budget=100)
        assert info.value.fields == ["token_budget", "history[3].tool_calls[0].id"]
        assert info.value.status is not None and len(info.value.status.details) == 2
        assert isinstance(info.value.__cause__, grpc.aio.AioRpcError)

        fake.reply = abort_with(grpc.StatusCode.NOT_FOUND, "gone", ERROR_INFO)
        with pytest.raises(ContextdError) as info:
            await aclient.count_tokens("x")
        assert info.value.code == grpc.StatusCode.NOT_FOUND
        assert info.value.violations == [] and info.value.status is not None

        fake.reply = respond(FUTURE_RESPONSE)
        result = await aclient.build_messages("Hi", token_budget=100)
        assert result.messages[1]["role"] == "unknown(42)"
        assert result.report.dropped[0] == DroppedRange(0, 2, "unknown(99)")

        fake.reply = respond(pb.BuildMessagesResponse(payload_json="{oops"))
        with pytest.raises(InvalidResponseError, match="payload_json is not valid JSON"):
            await aclient.build_messages("Hi", token_budget=100, output_format="anthropic")

"""JSON a caller sends inside a request (tool-call arguments, tool parameter schemas) is
read with an explicit nesting limit of 64 levels: as deep is accepted, one level more is
INVALID_ARGUMENT naming the field, and 100,000 levels (where Python's parser would hit
the interpreter's recursion limit) are refused the same way, never INTERNAL."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, context_pb2_grpc
from contextd.v1 import context_pb2 as pb

from tests.support.status import violation_details

LIMIT = 64


def nested(levels: int) -> str:
    """A JSON object ``levels`` deep: {"a": {"a": ... [1] ...}}."""
    return '{"a":' * (levels - 1) + "{}" + "}" * (levels - 1)


@pytest.fixture(scope="module")
def channel(address: str) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(address) as channel:
        yield channel


def build_with_arguments(channel: grpc.Channel, arguments: str) -> grpc.RpcError | None:
    history = [
        pb.Message(role=pb.ROLE_USER, content="look it up"),
        pb.Message(
            role=pb.ROLE_ASSISTANT,
            tool_calls=[pb.ToolCall(id="c1", name="lookup", arguments=arguments)],
        ),
        pb.Message(role=pb.ROLE_TOOL, tool_call_id="c1", content="found"),
    ]
    request = pb.BuildMessagesRequest(user_message="and?", token_budget=100_000, history=history)
    try:
        context_pb2_grpc.ContextServiceStub(channel).BuildMessages(request)
    except grpc.RpcError as error:
        return error
    return None


def test_arguments_as_deep_as_the_limit_are_kept(channel: grpc.Channel) -> None:
    assert build_with_arguments(channel, nested(LIMIT)) is None


@pytest.mark.parametrize("levels", [LIMIT + 1, 100_000])
def test_deeper_arguments_are_refused_naming_the_field(channel: grpc.Channel, levels: int) -> None:
    error = build_with_arguments(channel, nested(levels))
    assert error is not None and error.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    [(field, description)] = violation_details(error)
    assert field == "history[1].tool_calls[0].arguments"
    assert description == f"arguments must be a JSON object, nested at most {LIMIT} deep"


@pytest.mark.parametrize("levels", [LIMIT + 1, 100_000])
def test_a_tool_schema_nested_too_deep_is_refused(channel: grpc.Channel, levels: int) -> None:
    tool = cpb.ToolDefinition(name="lookup", parameters_json=nested(levels))
    request = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id="nesting"), user_message="hi", tools=[tool]
    )
    with pytest.raises(grpc.RpcError) as raised:
        list(chat_pb2_grpc.ChatServiceStub(channel).StreamChat(request))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violation_details(raised.value) == [
        ("tools[0].parameters_json", f"must be a JSON schema object, nested at most {LIMIT} deep")
    ]


def test_a_tool_schema_as_deep_as_the_limit_is_taken(channel: grpc.Channel) -> None:
    tool = cpb.ToolDefinition(name="lookup", parameters_json=nested(LIMIT))
    request = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id="nesting"), user_message="hi", tools=[tool]
    )
    events = list(chat_pb2_grpc.ChatServiceStub(channel).StreamChat(request))
    assert events[-1].turn_completed.status == cpb.TURN_STATUS_OK

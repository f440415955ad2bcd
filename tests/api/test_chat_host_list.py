"""StreamChat with the host's own list (``prebuilt``), forced tool calls and structured
output, against the offline echo model: the context is the host's messages only, a
list that ends with tool results goes on to the next step with no stored turn, the
server's --max-prompt-tokens holds for every turn, and the echo model calls the tools
``tool_choice`` asks for and answers JSON valid against the schema asked for."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import jsonschema
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, memory_pb2, memory_pb2_grpc
from contextd.v1 import context_pb2 as pb

from tests.support.server import ServerProcess, start_server
from tests.support.status import violations

MAX_PROMPT = 400
WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 10},
        "days": {"type": "integer", "minimum": 3, "maximum": 7},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "when": {"anyOf": [{"type": "null"}, {"type": "string", "format": "date"}]},
    },
    "required": ["city", "days", "unit", "when"],
    "additionalProperties": False,
}
TOOLS = [
    cpb.ToolDefinition(name="get_weather", parameters_json=json.dumps(WEATHER_SCHEMA)),
    cpb.ToolDefinition(name="get_time"),
]


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[chat_pb2_grpc.ChatServiceStub]:
    proc: ServerProcess = start_server(
        tmp_path_factory.mktemp("host-list"), "--max-prompt-tokens", str(MAX_PROMPT)
    )
    try:
        with grpc.insecure_channel(proc.address) as channel:
            memory_pb2_grpc.MemoryServiceStub(channel).AddMemory(
                memory_pb2.AddMemoryRequest(user_id="hal", content="Hal likes sailing.")
            )
            yield chat_pb2_grpc.ChatServiceStub(channel)
    finally:
        assert proc.stop() == 0


def turn(stub: chat_pb2_grpc.ChatServiceStub, **fields: Any) -> list[cpb.StreamChatResponse]:
    fields.setdefault("session", pb.SessionContext(user_id="hal"))
    return list(stub.StreamChat(cpb.StreamChatRequest(**fields), timeout=30))


def refused(stub: chat_pb2_grpc.ChatServiceStub, **fields: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as error:
        turn(stub, **fields)
    return error.value


def call(call_id: str) -> pb.ToolCall:
    return pb.ToolCall(id=call_id, name="get_time", arguments="{}")


def test_a_prebuilt_turn_without_messages_is_the_user_message_alone(stub: Any) -> None:
    done = turn(stub, user_message="What do I like?", prebuilt=True)[-1].turn_completed
    # No memory, summary or system layer was added: one message reached the model.
    assert done.final_text.startswith("echo: I received 1 message ")
    session = turn(stub, user_message="What do I like?")[-1].turn_completed
    assert session.final_text.startswith("echo: I received 2 messages "), "memories added"


def test_a_prebuilt_list_ending_with_tool_results_goes_on(stub: Any) -> None:
    messages = [
        pb.Message(role=pb.ROLE_USER, content="What time is it?"),
        pb.Message(role=pb.ROLE_ASSISTANT, tool_calls=[call("c1")]),
        pb.Message(role=pb.ROLE_TOOL, tool_call_id="c1", content="noon"),
    ]
    events = turn(stub, messages=messages, prebuilt=True, tools=TOOLS)
    started, done = events[0].turn_started, events[-1].turn_completed
    assert done.status == cpb.TURN_STATUS_OK
    assert done.final_text.startswith("echo: I received 3 messages ")
    assert started.user_message_id == ""  # nothing of the host's list is stored


def test_a_prebuilt_list_ending_with_the_assistant_needs_a_user_message(stub: Any) -> None:
    messages = [
        pb.Message(role=pb.ROLE_USER, content="Hi"),
        pb.Message(role=pb.ROLE_ASSISTANT, content="Hello"),
    ]
    error = refused(stub, messages=messages, prebuilt=True)
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert violations(error) == ["user_message"]


@pytest.mark.parametrize("prebuilt", [True, False])
def test_a_prompt_over_max_prompt_tokens_is_refused(stub: Any, prebuilt: bool) -> None:
    error = refused(stub, user_message="word " * (MAX_PROMPT * 2), prebuilt=prebuilt)
    assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert f"max_prompt_tokens ({MAX_PROMPT})" in (error.details() or "")


def test_required_calls_every_tool_with_arguments_valid_against_its_schema(stub: Any) -> None:
    events = turn(
        stub,
        user_message="Weather?",
        prebuilt=True,
        tools=TOOLS,
        tool_choice=cpb.ToolChoice(mode=cpb.TOOL_CHOICE_MODE_REQUIRED),
    )
    done = events[-1].turn_completed
    assert done.status == cpb.TURN_STATUS_REQUIRES_ACTION
    assert [c.name for c in done.pending_tool_calls] == ["get_weather", "get_time"]
    jsonschema.validate(json.loads(done.pending_tool_calls[0].arguments), WEATHER_SCHEMA)
    again = turn(
        stub,
        user_message="Weather?",
        prebuilt=True,
        tools=TOOLS,
        tool_choice=cpb.ToolChoice(mode=cpb.TOOL_CHOICE_MODE_REQUIRED),
        parallel_tool_calls=False,
    )[-1].turn_completed
    assert [c.name for c in again.pending_tool_calls] == ["get_weather"]
    assert again.pending_tool_calls[0].arguments == done.pending_tool_calls[0].arguments


def test_a_named_function_is_the_one_called_in_a_session_turn(stub: Any) -> None:
    done = turn(
        stub,
        user_message="Time?",
        tools=TOOLS,
        tool_choice=cpb.ToolChoice(mode=cpb.TOOL_CHOICE_MODE_FUNCTION, function_name="get_time"),
    )[-1].turn_completed
    assert [(c.name, c.arguments) for c in done.pending_tool_calls] == [("get_time", "{}")]


def test_none_and_auto_call_nothing(stub: Any) -> None:
    for mode in (cpb.TOOL_CHOICE_MODE_NONE, cpb.TOOL_CHOICE_MODE_AUTO):
        done = turn(stub, user_message="Hi", tools=TOOLS, tool_choice=cpb.ToolChoice(mode=mode))[
            -1
        ].turn_completed
        assert done.status == cpb.TURN_STATUS_OK and not done.pending_tool_calls


def test_a_json_schema_answer_is_valid_against_it(stub: Any) -> None:
    schema = {"$defs": {"Trip": WEATHER_SCHEMA}, "type": "array", "items": {"$ref": "#/$defs/Trip"}}
    done = turn(
        stub,
        user_message="Plan",
        prebuilt=True,
        model=cpb.ModelOptions(
            response_format=cpb.ResponseFormat(
                type=cpb.RESPONSE_FORMAT_TYPE_JSON_SCHEMA,
                name="Trips",
                schema_json=json.dumps(schema),
                strict=True,
            )
        ),
    )[-1].turn_completed
    jsonschema.validate(json.loads(done.final_text), schema)


def test_a_json_object_answer(stub: Any) -> None:
    done = turn(
        stub,
        user_message="Plan",
        prebuilt=True,
        model=cpb.ModelOptions(
            response_format=cpb.ResponseFormat(type=cpb.RESPONSE_FORMAT_TYPE_JSON_OBJECT)
        ),
    )[-1].turn_completed
    assert json.loads(done.final_text)["echo"].startswith("echo: I received 1 message ")


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"tool_choice": cpb.ToolChoice(mode=cpb.TOOL_CHOICE_MODE_REQUIRED)}, "tool_choice.mode"),
        (
            {
                "tools": TOOLS,
                "tool_choice": cpb.ToolChoice(
                    mode=cpb.TOOL_CHOICE_MODE_FUNCTION, function_name="nope"
                ),
            },
            "tool_choice.function_name",
        ),
        (
            {"tool_choice": cpb.ToolChoice(mode=cpb.TOOL_CHOICE_MODE_FUNCTION)},
            "tool_choice.function_name",
        ),
        ({"tool_choice": cpb.ToolChoice(mode=99)}, "tool_choice.mode"),
        (
            {
                "tools": TOOLS,
                "tool_protocol": cpb.TOOL_PROTOCOL_REACT,
                "tool_choice": cpb.ToolChoice(mode=cpb.TOOL_CHOICE_MODE_REQUIRED),
            },
            "tool_choice.mode",
        ),
        (
            {
                "model": cpb.ModelOptions(
                    response_format=cpb.ResponseFormat(
                        type=cpb.RESPONSE_FORMAT_TYPE_JSON_SCHEMA, schema_json="[1]"
                    )
                )
            },
            "model.response_format.schema_json",
        ),
        (
            {
                "model": cpb.ModelOptions(
                    response_format=cpb.ResponseFormat(
                        type=cpb.RESPONSE_FORMAT_TYPE_JSON_SCHEMA,
                        name="a b",
                        schema_json="{}",
                    )
                )
            },
            "model.response_format.name",
        ),
        (
            {"model": cpb.ModelOptions(response_format=cpb.ResponseFormat(type=7))},
            "model.response_format.type",
        ),
    ],
)
def test_a_bad_choice_or_format_is_refused_naming_it(
    stub: Any, fields: dict[str, Any], named: str
) -> None:
    error = refused(stub, user_message="Hi", **fields)
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert named in violations(error)

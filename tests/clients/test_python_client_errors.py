"""The Python SDK's errors, channels and metadata, and the async client, against a live server."""

from __future__ import annotations

import asyncio
import json
import pickle
from typing import Any

import contextd_client
import grpc
import grpc.aio
import pytest
from contextd_client import (
    AsyncContextClient,
    ContextClient,
    ContextdError,
    FieldViolation,
    RemovedToolCall,
    pb,
    pb_grpc,
)

from tests.support.sdk import EXPECTED_HISTORY_OUT, HISTORY, expect_error, free_port, without_tokens

# Errors -----------------------------------------------------------------------------


def test_invalid_argument_names_the_fields(client: ContextClient) -> None:
    error = expect_error(lambda: client.build_messages("Hi", token_budget=0))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.fields == ["token_budget"]
    assert error.violations == [
        FieldViolation("token_budget", "must be a positive number of tokens")
    ]
    assert error.message == "token_budget: must be a positive number of tokens"
    assert str(error) == f"INVALID_ARGUMENT: {error.message}"
    assert isinstance(error.__cause__, grpc.RpcError)
    assert error.status is not None
    assert error.status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]


def test_unknown_role_is_left_to_the_server(client: ContextClient) -> None:
    history = [{"role": "wizard", "content": "abracadabra"}]
    error = expect_error(lambda: client.build_messages("Hi", history=history, token_budget=100))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.fields == ["history[0].role"]
    missing = expect_error(lambda: client.count_tokens(messages=[{"content": "no role"}]))
    assert missing.fields == ["messages[0].role"]


def test_several_violations_in_one_error(client: ContextClient) -> None:
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "not here"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "bad id!", "name": "f"}]},
    ]
    error = expect_error(
        lambda: client.build_messages("Hi", history=history, token_budget=-1, tokenizer="estimate")
    )
    assert error.fields == ["token_budget", "history[0].role", "history[1].tool_calls[0].id"]


def test_unknown_tokenizer(client: ContextClient) -> None:
    error = expect_error(lambda: client.count_tokens("x", tokenizer="no-such-tokenizer"))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.fields == ["tokenizer"]


def test_error_pickles() -> None:
    error = ContextdError(
        grpc.StatusCode.INVALID_ARGUMENT, "bad", [FieldViolation("token_budget", "positive")]
    )
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.code, copy.message, copy.fields) == (error.code, "bad", ["token_budget"])


def test_bare_rpc_error_becomes_unknown() -> None:
    error = ContextdError.from_rpc_error(grpc.RpcError("boom"))
    assert error.code == grpc.StatusCode.UNKNOWN
    assert error.message == "boom"
    assert error.violations == [] and error.status is None


def test_unreachable_server() -> None:
    with ContextClient(f"127.0.0.1:{free_port()}", timeout=5) as offline:
        error = expect_error(offline.list_tokenizers)
    assert error.code == grpc.StatusCode.UNAVAILABLE
    assert isinstance(error.__cause__, grpc.RpcError)


@pytest.mark.parametrize(
    ("kwargs", "exception"),
    [
        ({"history": [{"role": "user", "content": 42}]}, TypeError),
        ({"history": [{"role": 3.5, "content": "x"}]}, TypeError),
        ({"history": {"role": "user", "content": "x"}}, TypeError),
        ({"history": ["user: hi"]}, TypeError),
        ({"history": [{"role": "user", "tool_calls": "call"}]}, TypeError),
        ({"history": [{"role": "assistant", "tool_calls": [{"arguments": {1, 2}}]}]}, TypeError),
        ({"history": [{"role": "assistant", "id": 1.5}]}, TypeError),
        ({"compression_summary": {"message_ids": "m1", "start_message_id": "m1"}}, TypeError),
        ({"layers": {"identity": "x", "persona": "y"}}, ValueError),
        ({"output_format": "xml"}, ValueError),
        ({"on_overflow": "truncate"}, ValueError),
        ({"token_budget": "100"}, TypeError),
        ({"token_budget": 2**40}, ValueError),
    ],
)
def test_what_cannot_be_encoded_raises_locally(
    client: ContextClient, kwargs: dict[str, Any], exception: type[Exception]
) -> None:
    arguments: dict[str, Any] = {"token_budget": 100, **kwargs}
    with pytest.raises(exception):
        client.build_messages("Hi", **arguments)


# Channels, metadata, closing --------------------------------------------------------


class _RecordMetadata(grpc.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]
    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        self.seen.append((details.method, details.metadata))
        return continuation(details, request)


def test_shared_channel_stays_open(address: str) -> None:
    recorder = _RecordMetadata()
    with grpc.insecure_channel(address) as raw:
        channel = grpc.intercept_channel(raw, recorder)
        with ContextClient(channel=channel, metadata={"x-tenant": "acme"}) as first:
            first.list_tokenizers()
        assert first.channel is channel
        # Closing the first client left the channel open for the second.
        second = ContextClient(channel=channel, metadata=[("x-request", "2")], timeout=None)
        assert second.count_tokens("abc", tokenizer="estimate").total_tokens == 1
        second.close()
        response = pb_grpc.ContextServiceStub(channel).ListTokenizers(pb.ListTokenizersRequest())
        assert response.default_tokenizer
    assert recorder.seen[0] == (
        "/contextd.v1.ContextService/ListTokenizers",
        (("x-tenant", "acme"),),
    )
    assert recorder.seen[1] == ("/contextd.v1.ContextService/CountTokens", (("x-request", "2"),))


def test_context_manager_closes_its_own_channel(address: str) -> None:
    with ContextClient(address) as owned:
        assert owned.list_tokenizers().default
    with pytest.raises(ValueError, match="closed channel"):
        owned.list_tokenizers()
    owned.close()  # closing twice is fine


def test_stub_and_generated_modules(client: ContextClient) -> None:
    assert isinstance(client.stub, pb_grpc.ContextServiceStub)
    assert contextd_client.pb is contextd_client._pb.context_pb2
    assert contextd_client.pb_grpc is contextd_client._pb.context_pb2_grpc
    response = client.stub.CountTokens(
        pb.CountTokensRequest(texts=["hello world"], tokenizer="estimate")
    )
    assert response.total_tokens == 3


# Async client -----------------------------------------------------------------------


async def test_async_every_method(aclient: AsyncContextClient) -> None:
    prompt, built, count, tokenizers = await asyncio.gather(
        aclient.assemble_prompt("You are Ada.", rules="Be kind.", tokenizer="estimate"),
        aclient.build_messages(
            "And tomorrow?",
            system_prompt="You are a weather bot.",
            history=HISTORY,
            token_budget=10_000,
            output_format="openai",
        ),
        aclient.count_tokens(
            ["hello world"], [{"role": "user", "content": "abcd"}], tokenizer="estimate"
        ),
        aclient.list_tokenizers(),
    )
    assert prompt.system_prompt == "You are Ada.\n\nBe kind."
    assert prompt.tokens == 6
    assert without_tokens(built.messages[1:-1]) == EXPECTED_HISTORY_OUT
    assert built.payload is not None and built.payload["messages"][-1]["content"] == "And tomorrow?"
    assert built.report.removed_tool_calls == [RemovedToolCall(4, "call_c")]
    assert (count.text_tokens, count.message_tokens, count.total_tokens) == ([3], [1], 4)
    assert "estimate" in tokenizers.names


async def test_async_matches_sync(aclient: AsyncContextClient, client: ContextClient) -> None:
    kwargs: dict[str, Any] = {
        "history": HISTORY,
        "token_budget": 60,
        "output_format": "anthropic",
        "compression_summary": {"message_ids": [1], "start_message_id": 1, "summary": "S"},
    }
    assert await aclient.build_messages("Next?", **kwargs) == client.build_messages(
        "Next?", **kwargs
    )


async def test_async_errors(aclient: AsyncContextClient) -> None:
    with pytest.raises(ContextdError) as info:
        await aclient.build_messages("Hi", token_budget=0)
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.fields == ["token_budget"]
    assert isinstance(info.value.__cause__, grpc.aio.AioRpcError)

    with pytest.raises(ContextdError) as info:
        await aclient.build_messages(
            "Hi", history=[{"role": "wizard", "content": "?"}], token_budget=100
        )
    assert info.value.fields == ["history[0].role"]

    with pytest.raises(ContextdError) as info:
        await aclient.assemble_prompt("")
    assert info.value.fields == ["layers.identity"]

    with pytest.raises(ContextdError) as info:
        await aclient.build_messages(
            "Hi", system_prompt="x" * 400, token_budget=5, on_overflow="fail"
        )
    assert info.value.code == grpc.StatusCode.FAILED_PRECONDITION

    with pytest.raises(ValueError):
        await aclient.build_messages("Hi", token_budget=10, output_format="xml")  # type: ignore[arg-type]


async def test_async_unreachable_server() -> None:
    async with AsyncContextClient(f"127.0.0.1:{free_port()}", timeout=5) as offline:
        with pytest.raises(ContextdError) as info:
            await offline.count_tokens("x")
    assert info.value.code == grpc.StatusCode.UNAVAILABLE


async def test_async_shared_channel_and_close(address: str) -> None:
    channel = grpc.aio.insecure_channel(address)
    try:
        async with AsyncContextClient(channel=channel, metadata={"x-tenant": "acme"}) as first:
            assert (await first.list_tokenizers()).default
        assert first.channel is channel
        second = AsyncContextClient(channel=channel)
        assert (await second.count_tokens("abcd", tokenizer="estimate")).total_tokens == 1
        await second.close()
        raw = await pb_grpc.ContextServiceStub(channel).ListTokenizers(pb.ListTokenizersRequest())
        assert raw.default_tokenizer
    finally:
        await channel.close(None)

    async with AsyncContextClient(address) as owned:
        assert isinstance(owned.stub, pb_grpc.ContextServiceStub)
        response = await owned.stub.CountTokens(
            pb.CountTokensRequest(texts=["abcd"], tokenizer="estimate")
        )
        assert response.total_tokens == 1
    with pytest.raises(grpc.aio.UsageError):
        await owned.list_tokenizers()
    await owned.close()  # closing twice is fine


def test_payload_json_is_parsed(client: ContextClient) -> None:
    response = client.stub.BuildMessages(
        pb.BuildMessagesRequest(
            user_message="Hi", token_budget=100, output_format=pb.OUTPUT_FORMAT_OPENAI
        )
    )
    result = client.build_messages("Hi", token_budget=100, output_format="openai")
    assert result.payload == json.loads(response.payload_json)

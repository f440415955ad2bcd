"""Native methods called in process (fronts/grpc/in_process.py), without a server: the
guard runs around the handler as on the native port, a status comes back as the
AioRpcError a channel raises, and what the native server does around a handler (the
message size limit, its stop) is done too."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import grpc.aio
import pytest
from contextd.core.errors import InvalidArgument, Unauthenticated
from contextd.core.identity import Identity
from contextd.fronts.grpc.in_process import InProcess
from contextd.fronts.grpc.interceptors import GuardInterceptor
from google.protobuf import wrappers_pb2
from google.rpc import error_details_pb2, status_pb2

SERVICE = "test.Words"
METHOD = f"/{SERVICE}/Stream"
Text = wrappers_pb2.StringValue


class _Keys:
    async def authenticate(self, token: str) -> Identity:
        if token != "good":
            raise Unauthenticated()
        return Identity("alice", credential_id="k1")


def registered(handler: Callable[[Any, Any], AsyncIterator[Text]]) -> Callable[[Any], None]:
    """An ``add_*Servicer_to_server`` for one server-streaming method."""

    def register(server: Any) -> None:
        handlers = {"Stream": grpc.unary_stream_rpc_method_handler(handler)}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        server.add_registered_method_handlers(SERVICE, handlers)

    return register


async def words(request: Text, context: Any) -> AsyncIterator[Text]:
    for word in request.value.split():
        if word == "bad":
            raise InvalidArgument.one("value", "holds a bad word")
        yield Text(value=word)
        await asyncio.sleep(0)


def calls(guard: GuardInterceptor | None = None, max_bytes: int = 1000) -> InProcess:
    return InProcess(guard or GuardInterceptor(), [registered(words)], max_bytes)


async def read_all(
    calls: InProcess, text: str, metadata: tuple[tuple[str, str], ...] = ()
) -> list[str]:
    call = calls.stream(METHOD, Text(value=text), metadata, "ipv4:127.0.0.1:1")
    try:
        read = []
        while (message := await call.read()) is not None:
            read.append(message.value)
        return read
    finally:
        await call.aclose()


def rpc_codes(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [str(getattr(r, "code", "")) for r in caplog.records if r.msg == "rpc"]


async def test_a_call_streams_through_the_guard(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "contextd.rpc")
    assert await read_all(calls(), "one two three") == ["one", "two", "three"]
    assert rpc_codes(caplog) == ["OK"]


async def test_a_failure_is_the_status_a_channel_reports(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "contextd.rpc")
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await read_all(calls(), "good bad")
    error = failed.value
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == "value: holds a bad word"
    details = dict(error.trailing_metadata())["grpc-status-details-bin"]
    [detail] = status_pb2.Status.FromString(details).details
    bad = error_details_pb2.BadRequest()
    assert detail.Unpack(bad) and bad.field_violations[0].field == "value"
    assert rpc_codes(caplog) == ["INVALID_ARGUMENT"]


async def test_the_credential_is_checked_as_on_the_native_port() -> None:
    keyed = calls(GuardInterceptor(_Keys()))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await read_all(keyed, "hello")
    assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.aio.AioRpcError):
        await read_all(keyed, "hello", (("authorization", "Bearer wrong"),))
    assert await read_all(keyed, "hello", (("authorization", "Bearer good"),)) == ["hello"]


async def test_a_request_over_the_limit_is_refused_at_its_first_read() -> None:
    small = calls(max_bytes=10)
    call = small.stream(METHOD, Text(value="x" * 20), (), "ipv4:127.0.0.1:1")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call.read()
    assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    await call.aclose()


async def test_closing_a_call_mid_stream_cancels_it(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "contextd.rpc")
    call = calls().stream(METHOD, Text(value="one two"), (), "ipv4:127.0.0.1:1")
    first = await call.read()
    assert first is not None and first.value == "one"  # type: ignore[attr-defined]
    await call.aclose()
    assert rpc_codes(caplog) == ["CANCELLED"]


async def test_a_method_not_served_in_process_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="not a server-streaming method"):
        calls().stream("/test.Words/Missing", Text(), (), "")


async def test_the_stop_refuses_new_calls_and_cancels_those_left_at_the_grace() -> None:
    slow_started = asyncio.Event()

    async def slow(request: Text, context: Any) -> AsyncIterator[Text]:
        yield Text(value="first")
        slow_started.set()
        await asyncio.sleep(30)
        yield Text(value="never")

    running = InProcess(GuardInterceptor(), [registered(slow)], 1000)

    async def client() -> list[str]:
        return await read_all(running, "x")

    task = asyncio.create_task(client())
    await slow_started.wait()
    await running.stop(0.05)
    with pytest.raises(grpc.aio.AioRpcError) as cancelled:
        await task
    assert cancelled.value.code() is grpc.StatusCode.CANCELLED
    later = running.stream(METHOD, Text(value="x"), (), "")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await later.read()
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE

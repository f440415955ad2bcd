"""The spans of real calls, read from an in-memory exporter: a StreamChat turn with a
tool call (the server span, its context build, store transactions, two model calls
around the tool run), the GenAI attributes, content only when asked for, the caller's
trace on both ports, trace ids in log lines, and an error status."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence

import aiohttp
import grpc
import pytest
from contextd.tracing.genai import CAPTURE_CONTENT_ENV
from contextd.v1 import chat_pb2_grpc, context_pb2_grpc
from contextd.v1 import context_pb2 as pb
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from tests.support.chat_live import request
from tests.support.fakes import openai_sse as oa
from tests.support.grpc_web import call
from tests.support.web_port import ALLOWED, CTX
from tests.tracing.conftest import Traced

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


def _script_tool_turn(traced: Traced) -> None:
    call_args = json.dumps({"query": "favourite colour"})
    traced.fake.script(
        oa.StreamReply(oa.tool_call_frames([("call_1", "memory_search", call_args)])),
        oa.text_reply(["Blue, ", "I think."]),
    )


async def _turn(traced: Traced, text: str) -> list[ReadableSpan]:
    """One StreamChat turn; the spans of its trace."""
    traced.exporter.clear()
    stub = chat_pb2_grpc.ChatServiceStub(traced.channel)
    user = f"t-{uuid.uuid4().hex[:8]}"
    events = [e async for e in stub.StreamChat(request(user, text))]
    assert events[-1].WhichOneof("event") == "turn_completed"
    [server] = [s for s in traced.exporter.get_finished_spans() if s.kind is SpanKind.SERVER]
    assert server.context is not None
    return [
        s
        for s in traced.exporter.get_finished_spans()
        if s.context is not None and s.context.trace_id == server.context.trace_id
    ]


def _named(found: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in found if s.name == name]


def _parent_of(found: Sequence[ReadableSpan], span: ReadableSpan) -> ReadableSpan:
    assert span.parent is not None
    [parent] = [
        s for s in found if s.context is not None and s.context.span_id == span.parent.span_id
    ]
    return parent


def _within(found: Sequence[ReadableSpan], span: ReadableSpan, ancestor: ReadableSpan) -> bool:
    while span.parent is not None:
        span = _parent_of(found, span)
        if span is ancestor:
            return True
    return False


async def test_a_turn_with_a_tool_call_is_one_tree(traced: Traced) -> None:
    _script_tool_turn(traced)
    found = await _turn(traced, "what is my favourite colour?")
    [server] = _named(found, "contextd.v1.ChatService/StreamChat")
    assert server.parent is None
    assert server.kind is SpanKind.SERVER
    assert dict(server.attributes or {}) == {
        "rpc.system": "grpc",
        "rpc.service": "contextd.v1.ChatService",
        "rpc.method": "StreamChat",
        "rpc.grpc.status_code": 0,
    }
    first, second = _named(found, "chat fake-model")
    [tool] = _named(found, "execute_tool memory_search")
    assert first.start_time is not None and tool.start_time is not None
    assert second.start_time is not None and first.end_time is not None
    assert first.end_time <= tool.start_time
    assert tool.end_time is not None and tool.end_time <= second.start_time
    for span in (first, second, tool):
        assert _parent_of(found, span) is server
    searches = _named(found, "contextd.memory_search")  # the memory layer's and the tool's
    assert [s for s in searches if _parent_of(found, s) is tool]
    contexts = _named(found, "contextd.session_context")
    assert len(contexts) == 2, "one context per model step"
    assert all(_within(found, c, server) for c in contexts)
    transactions = _named(found, "sqlite transaction")
    assert transactions and all(_within(found, t, server) for t in transactions)
    assert dict(transactions[0].attributes or {})["db.system"] == "sqlite"

    assert first.kind is SpanKind.CLIENT
    attributes = dict(first.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.system"] == "openai"
    assert attributes["gen_ai.request.model"] == "fake-model"
    assert attributes["gen_ai.response.model"] == oa.MODEL
    assert attributes["gen_ai.response.id"] == oa.CHUNK_ID
    assert attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert attributes["gen_ai.usage.input_tokens"] == 40
    assert attributes["gen_ai.usage.output_tokens"] == 25
    assert attributes["server.address"] == "127.0.0.1"
    assert attributes["server.port"] == traced.fake.port
    assert dict(second.attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)
    assert dict(second.attributes or {})["gen_ai.usage.input_tokens"] == 11
    assert dict(tool.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "memory_search",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.type": "function",
    }
    everything = json.dumps([dict(s.attributes or {}) for s in found], default=str)
    assert "favourite colour" not in everything, "no content by default"


async def test_message_content_only_when_asked_for(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    _script_tool_turn(traced)
    found = await _turn(traced, "what is my favourite colour?")
    first, second = _named(found, "chat fake-model")
    sent = json.loads(str(dict(first.attributes or {})["gen_ai.input.messages"]))
    assert sent[-1] == {
        "role": "user",
        "parts": [{"type": "text", "content": "what is my favourite colour?"}],
    }
    [answer] = json.loads(str(dict(first.attributes or {})["gen_ai.output.messages"]))
    assert answer["parts"] == [
        {
            "type": "tool_call",
            "id": "call_1",
            "name": "memory_search",
            "arguments": {"query": "favourite colour"},
        }
    ]
    [answer] = json.loads(str(dict(second.attributes or {})["gen_ai.output.messages"]))
    assert answer == {
        "role": "assistant",
        "parts": [{"type": "text", "content": "Blue, I think."}],
        "finish_reason": "stop",
    }


def _build_request() -> pb.BuildMessagesRequest:
    return pb.BuildMessagesRequest(user_message="hi", token_budget=500)


async def test_the_native_port_continues_the_callers_trace(traced: Traced) -> None:
    traced.exporter.clear()
    stub = context_pb2_grpc.ContextServiceStub(traced.channel)
    await stub.BuildMessages(_build_request(), metadata=(("traceparent", TRACEPARENT),))
    [server] = [s for s in traced.exporter.get_finished_spans() if s.kind is SpanKind.SERVER]
    assert server.context is not None and server.parent is not None
    assert f"{server.context.trace_id:032x}" == CALLER_TRACE
    assert f"{server.parent.span_id:016x}" == CALLER_SPAN
    [build] = _named(traced.exporter.get_finished_spans(), "contextd.build_messages")
    assert build.parent is not None and build.parent.span_id == server.context.span_id


async def test_the_web_port_continues_the_callers_trace(traced: Traced) -> None:
    traced.exporter.clear()
    headers = {"Origin": ALLOWED, "traceparent": TRACEPARENT, "tracestate": "vendor=1"}
    async with aiohttp.ClientSession() as http:
        reply = await call(
            http, traced.web, f"{CTX}/BuildMessages", _build_request(), headers=headers
        )
    assert reply.code == grpc.StatusCode.OK
    [server] = [s for s in traced.exporter.get_finished_spans() if s.kind is SpanKind.SERVER]
    assert server.context is not None and server.parent is not None
    assert f"{server.context.trace_id:032x}" == CALLER_TRACE
    assert f"{server.parent.span_id:016x}" == CALLER_SPAN
    assert server.context.trace_state.get("vendor") == "1"


async def test_log_lines_carry_the_trace_id(traced: Traced) -> None:
    traced.exporter.clear()
    traced.logs.lines.clear()
    stub = context_pb2_grpc.ContextServiceStub(traced.channel)
    await stub.BuildMessages(_build_request(), metadata=(("traceparent", TRACEPARENT),))
    [server] = [s for s in traced.exporter.get_finished_spans() if s.kind is SpanKind.SERVER]
    assert server.context is not None
    [access] = [json.loads(line) for line in traced.logs.lines if '"msg": "rpc"' in line]
    assert access["method"] == "/contextd.v1.ContextService/BuildMessages"
    assert access["trace_id"] == CALLER_TRACE
    assert access["span_id"] == f"{server.context.span_id:016x}"


async def test_a_failed_call_has_an_error_status(traced: Traced) -> None:
    traced.exporter.clear()
    stub = context_pb2_grpc.ContextServiceStub(traced.channel)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.BuildMessages(pb.BuildMessagesRequest(user_message="hi", token_budget=0))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    [server] = [s for s in traced.exporter.get_finished_spans() if s.kind is SpanKind.SERVER]
    assert server.status.status_code is StatusCode.ERROR
    attributes = dict(server.attributes or {})
    assert attributes["rpc.grpc.status_code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert attributes["error.type"] == "INVALID_ARGUMENT"


async def test_after_turn_model_calls_are_chat_spans_of_their_own_trace(traced: Traced) -> None:
    traced.fake.script(oa.text_reply(["Noted: you like jazz."]))
    found = await _turn(traced, "I like jazz. Please remember that.")
    [server] = _named(found, "contextd.v1.ChatService/StreamChat")
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        after = _named(traced.exporter.get_finished_spans(), "contextd.after_turn")
        linked = [s for s in after if any(link.context == server.context for link in s.links)]
        if linked or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.05)
    [root] = linked
    assert root.parent is None and root.context is not None
    in_root = [
        s
        for s in traced.exporter.get_finished_spans()
        if s.context is not None and s.context.trace_id == root.context.trace_id
    ]
    calls = _named(in_root, "chat fake-model")
    assert calls, "the memory extraction asks the model"
    for model_call in calls:
        assert _within(in_root, model_call, root)
        attributes = dict(model_call.attributes or {})
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.temperature"] == 0.0
        assert attributes["gen_ai.usage.output_tokens"] > 0
        assert "gen_ai.input.messages" not in attributes

"""A scripted ChatService on a free port, for client tests that need exact server events."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import grpc
from contextd_client import (
    cpb,
    pb,
    spb,
)

# An event kind of a newer server: field 99 of StreamChatResponse, an empty message.
UNKNOWN_EVENT = b"\x9a\x06\x00"
# A turn whose message starts with "slow" streams this many deltas, one per SLOW_DELAY s.
SLOW_DELTAS = 200
SLOW_DELAY = 0.05


def _started(request: cpb.StreamChatRequest) -> cpb.StreamChatResponse:
    return cpb.StreamChatResponse(
        turn_started=cpb.TurnStarted(
            session_id=request.session.session_id or "fake-new",
            turn_index=1,
            user_message_id="m1",
            provider="fake",
            model="fake-1",
        )
    )


def _completed(text: str, status: int = cpb.TURN_STATUS_OK, **extra: Any) -> Any:
    return cpb.StreamChatResponse(
        turn_completed=cpb.TurnCompleted(
            assistant_message_id="m2", final_text=text, status=status, **extra
        )
    )


@dataclass
class FakeChatServer:
    """Turns by user message: "slow ..." streams SLOW_DELTAS deltas SLOW_DELAY apart;
    "tool ..." ends with REQUIRES_ACTION; "fail ..." with ERROR; "future ..." sends an
    unknown event kind and status 42; "warn ..." sets the prompt warning; anything else
    is answered at once with "fake answer to: <message>"."""

    address: str = ""
    requests: list[cpb.StreamChatRequest] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    ended: list[spb.EndSessionRequest] = field(default_factory=list)
    # Set when a turn ended before its last event was sent: the client cancelled it.
    cancelled: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    # (RPC name, its metadata) of every call, in the order they came.
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def stream_chat(self, request: cpb.StreamChatRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        done = threading.Event()

        def ended() -> None:
            (self.finished if done.is_set() else self.cancelled).set()

        context.add_callback(ended)
        text = request.user_message
        started = _started(request)
        if text.startswith("warn"):
            started.turn_started.prompt_tokens_warning = True
            started.turn_started.prompt_tokens_estimate = 7000
        yield started
        if text.startswith("slow"):
            for i in range(SLOW_DELTAS):
                yield cpb.StreamChatResponse(text_delta=cpb.TextDelta(text=f"w{i} "))
                time.sleep(SLOW_DELAY)
            done.set()
            yield _completed("slow answer")
        elif text.startswith("tool"):
            call = pb.ToolCall(id="call_1", name="get_weather", arguments='{"city":"Paris"}')
            yield cpb.StreamChatResponse(text_delta=cpb.TextDelta(text="Let me check."))
            yield cpb.StreamChatResponse(tool_call=cpb.ToolCallEvent(call=call, step=0))
            usage = cpb.TokenUsage(prompt_tokens=10, completion_tokens=3)
            yield cpb.StreamChatResponse(usage=cpb.UsageEvent(usage=usage, step=0))
            done.set()
            yield _completed(
                "Let me check.",
                cpb.TURN_STATUS_REQUIRES_ACTION,
                pending_tool_calls=[call],
                turn_usage=usage,
            )
        elif text.startswith("fail"):
            yield cpb.StreamChatResponse(text_delta=cpb.TextDelta(text="Half an"))
            done.set()
            yield _completed(
                "Half an", cpb.TURN_STATUS_ERROR, error_message="the provider went away"
            )
        elif text.startswith("future"):
            yield UNKNOWN_EVENT
            yield cpb.StreamChatResponse(text_delta=cpb.TextDelta(text="from the future"))
            done.set()
            yield _completed("from the future", 42)
        else:
            answer = f"fake answer to: {text}"
            yield cpb.StreamChatResponse(text_delta=cpb.TextDelta(text=answer))
            done.set()
            yield _completed(answer)

    def create_session(
        self, request: spb.CreateSessionRequest, context: grpc.ServicerContext
    ) -> spb.CreateSessionResponse:
        session_id = f"fake-{len(self.sessions) + 1}"
        self.sessions.append(session_id)
        return spb.CreateSessionResponse(session=spb.Session(id=session_id, user_id="x"))

    def get_session(
        self, request: spb.GetSessionRequest, context: grpc.ServicerContext
    ) -> spb.GetSessionResponse:
        if request.session_id not in self.sessions:
            context.abort(grpc.StatusCode.NOT_FOUND, "no such session")
        return spb.GetSessionResponse(session=spb.Session(id=request.session_id))

    def end_session(
        self, request: spb.EndSessionRequest, context: grpc.ServicerContext
    ) -> spb.EndSessionResponse:
        self.ended.append(request)
        return spb.EndSessionResponse(ended=True)

    def export_events(self, request: spb.ExportEventsRequest, context: grpc.ServicerContext) -> Any:
        yield spb.ExportEventsResponse(json='{"type": "session_start"}', type="session_start")
        yield spb.ExportEventsResponse(json="[1, 2]", type="broken")


class _CallRecorder(grpc.ServerInterceptor):
    """Records each call's metadata in ``fake.calls`` before it is handled."""

    def __init__(self, fake: FakeChatServer) -> None:
        self.fake = fake

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Any],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        name = details.method.rsplit("/", 1)[-1]
        self.fake.calls.append((name, dict(details.invocation_metadata)))
        return continuation(details)


def _serialize(response: Any) -> bytes:
    return response if isinstance(response, bytes) else response.SerializeToString()


@contextlib.contextmanager
def fake_chat_server() -> Iterator[FakeChatServer]:
    """A FakeChatServer listening on a free local port (raw bytes pass as they are)."""
    fake = FakeChatServer()
    chat = grpc.method_handlers_generic_handler(
        "contextd.v1.ChatService",
        {
            "StreamChat": grpc.unary_stream_rpc_method_handler(
                fake.stream_chat,
                request_deserializer=cpb.StreamChatRequest.FromString,
                response_serializer=_serialize,
            )
        },
    )
    sessions = grpc.method_handlers_generic_handler(
        "contextd.v1.SessionService",
        {
            "CreateSession": grpc.unary_unary_rpc_method_handler(
                fake.create_session,
                request_deserializer=spb.CreateSessionRequest.FromString,
                response_serializer=_serialize,
            ),
            "GetSession": grpc.unary_unary_rpc_method_handler(
                fake.get_session,
                request_deserializer=spb.GetSessionRequest.FromString,
                response_serializer=_serialize,
            ),
            "EndSession": grpc.unary_unary_rpc_method_handler(
                fake.end_session,
                request_deserializer=spb.EndSessionRequest.FromString,
                response_serializer=_serialize,
            ),
            "ExportEvents": grpc.unary_stream_rpc_method_handler(
                fake.export_events,
                request_deserializer=spb.ExportEventsRequest.FromString,
                response_serializer=_serialize,
            ),
        },
    )
    server = grpc.server(
        ThreadPoolExecutor(max_workers=8),
        handlers=[chat, sessions],
        interceptors=[_CallRecorder(fake)],
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    fake.address = f"127.0.0.1:{port}"
    try:
        yield fake
    finally:
        server.stop(grace=None)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])

"""Every unary and server-streaming RPC of contextd, answered with empty responses, on a
free port; it records each request, for tests of what the clients send."""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import grpc
from contextd_client import mpb, pb, ppb, spb, upb
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

# Every service the recording server answers (ChatService's StreamChat is scripted by
# fake_chat_server.py instead, since the clients read its events).
SERVICES: tuple[ServiceDescriptor, ...] = tuple(
    service
    for module in (pb, spb, mpb, ppb, upb)
    for service in module.DESCRIPTOR.services_by_name.values()
)
# The token of a list call's second page, so that the clients send page_token too.
NEXT_PAGE = "page-2"


@dataclass
class RecordingServer:
    address: str = ""
    # Requests by RPC name ("ListSessions"), in the order they came.
    requests: dict[str, list[Message]] = field(default_factory=lambda: defaultdict(list))

    def answer(self, method: MethodDescriptor) -> Callable[[Message, Any], Any]:
        response_class = GetMessageClass(method.output_type)
        pages = "next_page_token" in method.output_type.fields_by_name

        def unary(request: Message, context: grpc.ServicerContext) -> Message:
            self.requests[method.name].append(request)
            first_page = pages and not request.page_token
            return response_class(next_page_token=NEXT_PAGE) if first_page else response_class()

        def stream(request: Message, context: grpc.ServicerContext) -> Iterator[Message]:
            self.requests[method.name].append(request)
            return iter(())

        return stream if method.server_streaming else unary


def _handler(server: RecordingServer, service: ServiceDescriptor) -> grpc.GenericRpcHandler:
    handlers = {}
    for method in service.methods:
        make = (
            grpc.unary_stream_rpc_method_handler
            if method.server_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        handlers[method.name] = make(
            server.answer(method),
            request_deserializer=GetMessageClass(method.input_type).FromString,
            response_serializer=lambda response: response.SerializeToString(),
        )
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


@contextlib.contextmanager
def recording_server() -> Iterator[RecordingServer]:
    """A RecordingServer listening on a free local port."""
    recorder = RecordingServer()
    server = grpc.server(
        ThreadPoolExecutor(max_workers=4),
        handlers=[_handler(recorder, service) for service in SERVICES],
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    recorder.address = f"127.0.0.1:{port}"
    try:
        yield recorder
    finally:
        server.stop(grace=None)

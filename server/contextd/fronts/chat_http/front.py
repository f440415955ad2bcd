"""The HTTP side of a model API on the web port: each request becomes one native call,
with the caller's credential as its ``authorization`` metadata, so that the native
interceptor authenticates, limits, audits and traces it exactly as any other call. A
turn's ``StreamChat`` is called in process (fronts/native.py), its events read as
they are made; the other calls go over the gateway's loopback channel. A front gives
its protocol's error shape and how it reads the credential; this holds the rest (CORS,
the body, the turn's events, the metrics)."""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import grpc
import grpc.aio
from aiohttp import web

from contextd.fronts.caller import FORWARDED_HEADERS
from contextd.fronts.chat_http.failure import HttpFailure, from_rpc_error
from contextd.fronts.chat_http.params import ParamMap
from contextd.fronts.native import NativeStream
from contextd.fronts.web.exchange import CallError
from contextd.fronts.web.gateway import BodyTooLarge, WebGateway
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2, context_pb2_grpc

TurnCall = NativeStream
STREAM_CHAT = f"/{cpb.DESCRIPTOR.services_by_name['ChatService'].full_name}/StreamChat"
# The caller's trace, passed on to the native call (the credential is the front's to read).
_TRACE_HEADERS = tuple(h for h in FORWARDED_HEADERS if h != "authorization")


class TurnRequest(Protocol):
    """A request translated into a native turn, and how its answer is written."""

    @property
    def native(self) -> cpb.StreamChatRequest: ...

    @property
    def params(self) -> ParamMap: ...

    async def answer(
        self, request: web.Request, cors: dict[str, str], call: TurnCall, started: cpb.TurnStarted
    ) -> web.StreamResponse: ...


class ModelFront(ABC):
    """A model API mounted on a WebGateway (``mounts=[front]``)."""

    # Its name in the web port's metrics, and the headers a browser may read.
    protocol: str
    exposed_headers: str

    def __init__(self) -> None:
        self._gateway: WebGateway | None = None

    def attach(self, gateway: WebGateway) -> None:
        self._gateway = gateway
        self.context = context_pb2_grpc.ContextServiceStub(gateway.channel)

    @property
    def gateway(self) -> WebGateway:
        assert self._gateway is not None, "not mounted"
        return self._gateway

    @abstractmethod
    def error_body(self, failure: HttpFailure) -> dict[str, object]:
        """The failure in the protocol's shape."""

    def credential(self, request: web.Request) -> list[str]:
        """The ``authorization`` values to pass on (``Bearer <key>``)."""
        return list(request.headers.getall("authorization", ()))

    def error_response(self, failure: HttpFailure, cors: Mapping[str, str]) -> web.Response:
        return web.Response(
            status=failure.status,
            text=json_text(self.error_body(failure)),
            content_type="application/json",
            headers={**cors, **failure.headers},
        )

    def count(self, code: grpc.StatusCode) -> None:
        if self.gateway.count is not None:
            self.gateway.count(self.protocol, code)

    async def run_turn(
        self, request: web.Request, translate: Callable[[bytes, web.Request], TurnRequest]
    ) -> web.StreamResponse:
        """One request that runs a native turn: the body read and translated, the turn
        started, the answer written by the translated request; a refusal answered in the
        protocol's shape."""
        cors = self.cors(request)
        if isinstance(cors, web.Response):
            return cors
        body = b""
        call: TurnCall | None = None
        code = grpc.StatusCode.OK
        try:
            body = await self.read(request)
            turn = translate(body, request)
            call = self.start_turn(request, turn.native)
            started = await turn_started(call, turn.params)
            return await turn.answer(request, cors, call, started)
        except HttpFailure as error:
            failure = error if call is not None else await self.refused_first(request, error)
            code = failure.metric_code
            return self.error_response(failure, cors)
        except (ConnectionResetError, asyncio.CancelledError):
            # The client went away: ConnectionResetError mid-answer is the same as the
            # disconnect that cancels this handler while it waits.
            code = grpc.StatusCode.CANCELLED
            raise asyncio.CancelledError from None
        finally:
            if call is not None:
                await call.aclose()
            self.gateway.release(body)
            self.count(code)

    def start_turn(self, request: web.Request, native: cpb.StreamChatRequest) -> TurnCall:
        """The turn's StreamChat, called in process."""
        gateway = self.gateway
        assert gateway.in_process is not None, "the web port calls no native method in process"
        metadata = tuple(self.metadata(request))
        return gateway.in_process.stream(STREAM_CHAT, native, metadata, gateway.call_peer(request))

    async def refused_first(self, request: web.Request, failure: HttpFailure) -> HttpFailure:
        """The failure of a request refused before its native call checked the
        credential: a caller without a valid one learns only that."""
        refused = await self.credential_failure(request)
        return refused if refused is not None and refused.status == 401 else failure

    async def credential_failure(self, request: web.Request) -> HttpFailure | None:
        """The failure for a credential the server refuses; None when it is accepted.
        Checked by a native call that needs one (ListTokenizers, which reads no user's
        data)."""
        try:
            await self.context.ListTokenizers(
                context_pb2.ListTokenizersRequest(), metadata=self.metadata(request)
            )
        except grpc.aio.AioRpcError as error:
            return from_rpc_error(error)
        return None

    def cors(self, request: web.Request) -> dict[str, str] | web.Response:
        """The CORS headers of an answer; a refusal for an origin not allowed (a browser
        would hide the answer, but the call would still have run)."""
        origin = request.headers.get("Origin")
        if origin is None:
            return {}
        cors = self.gateway.cors
        if not cors.allows(origin):
            return self.error_response(HttpFailure(403, "origin not allowed"), {})
        return {
            **cors.response_headers(origin),
            "Access-Control-Expose-Headers": self.exposed_headers,
        }

    async def read(self, request: web.Request) -> bytes:
        """The whole JSON body (given back to the gateway's budget after the call)."""
        if request.content_type != "application/json":
            raise HttpFailure(415, "the request body must be application/json")
        try:
            return await self.gateway.read_body(request, self.gateway.max_body)
        except BodyTooLarge as error:
            raise HttpFailure(413, error.message, code="request_too_large") from None
        except CallError as error:
            if error.code is grpc.StatusCode.DEADLINE_EXCEEDED:
                raise HttpFailure(408, error.message, code="timeout") from None
            raise HttpFailure(503, error.message, headers={"Retry-After": "1"}) from None

    def metadata(self, request: web.Request) -> grpc.aio.Metadata:
        """The native call's metadata: the credential and the trace context. Only values
        metadata can carry (printable ASCII) are passed on: a credential with any other
        character is no credential."""
        metadata = grpc.aio.Metadata()
        for value in self.credential(request):
            if _carried(value):
                metadata.add("authorization", value)
        for name in _TRACE_HEADERS:
            for value in request.headers.getall(name, ()):
                if _carried(value):
                    metadata.add(name, value)
        self.gateway.vouch_for_peer(request, metadata)
        return metadata


def _carried(value: str) -> bool:
    return value.isascii() and value.isprintable()


async def turn_started(call: TurnCall, params: ParamMap) -> cpb.TurnStarted:
    """The turn's first event; a refusal before it is the request's failure."""
    try:
        first = await call.read()
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error, params) from None
    if not isinstance(first, cpb.StreamChatResponse) or not first.HasField("turn_started"):
        raise HttpFailure(500, "the turn did not start")
    return first.turn_started


async def turn_completed(
    call: TurnCall,
    params: ParamMap,
    on_delta: Callable[[str], Awaitable[None]] | None,
) -> cpb.TurnCompleted:
    """Read the turn to its end, passing each text delta to ``on_delta`` (when given)."""
    try:
        while True:
            event = await call.read()
            if not isinstance(event, cpb.StreamChatResponse):
                break
            kind = event.WhichOneof("event")
            if kind == "text_delta" and on_delta is not None:
                await on_delta(event.text_delta.text)
            elif kind == "turn_completed":
                # The call's own end (its log and audit lines, the session free for the
                # next turn) comes before the answer's: the last event ends the stream.
                await call.read()
                return event.turn_completed
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error, params) from None
    raise HttpFailure(500, "the turn ended without its last event")


def json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

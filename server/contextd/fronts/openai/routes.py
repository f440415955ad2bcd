"""``/v1/chat/completions`` and ``/v1/models`` on the web port: each request becomes one
native call over the gateway's loopback channel, with the caller's credential as its
``authorization`` metadata, so that the native interceptor authenticates, limits, audits
and traces it exactly as any other call.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from aiohttp import web

from contextd.core.errors import cut
from contextd.fronts.caller import FORWARDED_HEADERS
from contextd.fronts.openai.errors import OpenAIError, from_rpc_error
from contextd.fronts.openai.request import ChatRequest, parse_body, translate
from contextd.fronts.openai.response import SESSION_ID_HEADER, Completion
from contextd.fronts.web.exchange import CallError
from contextd.fronts.web.gateway import BodyTooLarge, WebGateway
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, context_pb2, context_pb2_grpc

PROTOCOL = "openai"  # its name in the web port's metrics
_EXPOSED = f"{SESSION_ID_HEADER}, X-Request-Id, X-Should-Retry, Retry-After"
_LONGEST_PATH = 100


@dataclass(frozen=True, slots=True)
class Model:
    """A model ``GET /v1/models`` lists."""

    id: str
    owned_by: str


class OpenAIRoutes:
    """The OpenAI-compatible API, mounted on a WebGateway (``mounts=[routes]``)."""

    def __init__(self, models: Sequence[Model]) -> None:
        self._models = list(models)
        self._created = int(time.time())
        self._gateway: WebGateway | None = None

    def __call__(self, gateway: WebGateway) -> Iterable[web.RouteDef]:
        self._gateway = gateway
        self._chat = chat_pb2_grpc.ChatServiceStub(gateway.channel)
        self._context = context_pb2_grpc.ContextServiceStub(gateway.channel)
        unknown = [
            web.route(method, "/v1/{tail:.*}", self._unknown)
            for method in ("GET", "POST", "PUT", "PATCH", "DELETE")
        ]
        return [
            web.post("/v1/chat/completions", self._completions),
            web.get("/v1/models", self._list_models),
            web.get("/v1/models/{model}", self._get_model),
            *unknown,
        ]

    @property
    def gateway(self) -> WebGateway:
        assert self._gateway is not None, "not mounted"
        return self._gateway

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        cors = self._cors(request)
        if isinstance(cors, web.Response):
            return cors
        body = b""
        call: grpc.aio.UnaryStreamCall[cpb.StreamChatRequest, cpb.StreamChatResponse] | None
        call = None
        code = grpc.StatusCode.OK
        try:
            body = await self._read(request)
            chat = translate(parse_body(body), request.headers)
            call = self._chat.StreamChat(chat.native, metadata=self._metadata(request))
            started = await self._turn_started(call, chat)
            completion = Completion(chat.session_mode, started)
            if chat.stream:
                return await self._stream(request, cors, call, chat, completion)
            return await self._whole(cors, call, chat, completion)
        except OpenAIError as error:
            code = _metric_code(error)
            return _error_response(error, cors)
        except (ConnectionResetError, asyncio.CancelledError):
            # The client went away: ConnectionResetError mid-answer is the same as the
            # disconnect that cancels this handler while it waits.
            code = grpc.StatusCode.CANCELLED
            raise asyncio.CancelledError from None
        finally:
            if call is not None:
                call.cancel()
            self.gateway.release(body)
            if self.gateway.count is not None:
                self.gateway.count(PROTOCOL, code)

    async def _turn_started(
        self,
        call: grpc.aio.UnaryStreamCall[cpb.StreamChatRequest, cpb.StreamChatResponse],
        chat: ChatRequest,
    ) -> cpb.TurnStarted:
        """The turn's first event; a refusal before it is the request's error."""
        try:
            first = await call.read()
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error, chat.params) from None
        if not isinstance(first, cpb.StreamChatResponse) or not first.HasField("turn_started"):
            raise OpenAIError(500, "the turn did not start", "server_error")
        return first.turn_started

    async def _whole(
        self,
        cors: dict[str, str],
        call: grpc.aio.UnaryStreamCall[cpb.StreamChatRequest, cpb.StreamChatResponse],
        chat: ChatRequest,
        completion: Completion,
    ) -> web.Response:
        done = await _completed(call, chat, on_delta=None)
        failure = completion.failure(done)
        if failure is not None:
            raise failure
        return web.Response(
            text=_json(completion.whole(done)),
            content_type="application/json",
            headers={**cors, **completion.headers()},
        )

    async def _stream(
        self,
        request: web.Request,
        cors: dict[str, str],
        call: grpc.aio.UnaryStreamCall[cpb.StreamChatRequest, cpb.StreamChatResponse],
        chat: ChatRequest,
        completion: Completion,
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                **cors,
                **completion.headers(),
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
            }
        )
        await response.prepare(request)
        await _send(response, completion.first_chunk(chat.include_usage))

        async def on_delta(text: str) -> None:
            await _send(response, completion.chunk({"content": text}, None, chat.include_usage))

        try:
            done = await _completed(call, chat, on_delta)
        except OpenAIError as error:
            # Too late for a status: the SDKs raise an error event as the call's error.
            await _send(response, error.body())
            return response
        failure = completion.failure(done)
        if failure is not None:
            await _send(response, failure.body())
            return response
        for chunk in completion.last_chunks(done, chat.include_usage):
            await _send(response, chunk)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _list_models(self, request: web.Request) -> web.Response:
        return await self._models_answer(request, None)

    async def _get_model(self, request: web.Request) -> web.Response:
        return await self._models_answer(request, request.match_info["model"])

    async def _models_answer(self, request: web.Request, name: str | None) -> web.Response:
        """The models, once the credential is accepted: checked by a native call that
        needs one (ListTokenizers, which reads no user's data)."""
        cors = self._cors(request)
        if isinstance(cors, web.Response):
            return cors
        code = grpc.StatusCode.OK
        try:
            try:
                await self._context.ListTokenizers(
                    context_pb2.ListTokenizersRequest(), metadata=self._metadata(request)
                )
            except grpc.aio.AioRpcError as error:
                raise from_rpc_error(error) from None
            listed = [self._model_object(m) for m in self._models]
            if name is None:
                return web.json_response({"object": "list", "data": listed}, headers=cors)
            found = next((m for m in listed if m["id"] == name), None)
            if found is None:
                raise OpenAIError(
                    404,
                    "The model does not exist on this server.",
                    param="model",
                    code="model_not_found",
                )
            return web.json_response(found, headers=cors)
        except OpenAIError as error:
            code = _metric_code(error)
            return _error_response(error, cors)
        finally:
            if self.gateway.count is not None:
                self.gateway.count(PROTOCOL, code)

    def _model_object(self, model: Model) -> dict[str, Any]:
        return {
            "id": model.id,
            "object": "model",
            "created": self._created,
            "owned_by": model.owned_by,
        }

    async def _unknown(self, request: web.Request) -> web.Response:
        path = cut(request.path, _LONGEST_PATH)
        error = OpenAIError(404, f"Invalid URL ({cut(request.method)} {path})")
        return _error_response(error, {})

    def _cors(self, request: web.Request) -> dict[str, str] | web.Response:
        """The CORS headers of an answer; a refusal for an origin not allowed (a browser
        would hide the answer, but the call would still have run)."""
        origin = request.headers.get("Origin")
        if origin is None:
            return {}
        cors = self.gateway.cors
        if not cors.allows(origin):
            return _error_response(OpenAIError(403, "origin not allowed", "permission_error"), {})
        return {**cors.response_headers(origin), "Access-Control-Expose-Headers": _EXPOSED}

    async def _read(self, request: web.Request) -> bytes:
        if request.content_type != "application/json":
            raise OpenAIError(415, "the request body must be application/json")
        try:
            return await self.gateway.read_body(request, self.gateway.max_body)
        except BodyTooLarge as error:
            raise OpenAIError(413, error.message, code="request_too_large") from None
        except CallError as error:
            if error.code is grpc.StatusCode.DEADLINE_EXCEEDED:
                raise OpenAIError(408, error.message, code="timeout") from None
            raise OpenAIError(
                503, error.message, "server_error", headers={"Retry-After": "1"}
            ) from None

    def _metadata(self, request: web.Request) -> grpc.aio.Metadata:
        metadata = grpc.aio.Metadata()
        for name in FORWARDED_HEADERS:
            for value in request.headers.getall(name, ()):
                metadata.add(name, value)
        self.gateway.vouch_for_peer(request, metadata)
        return metadata


async def _completed(
    call: grpc.aio.UnaryStreamCall[cpb.StreamChatRequest, cpb.StreamChatResponse],
    chat: ChatRequest,
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
                return event.turn_completed
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error, chat.params) from None
    raise OpenAIError(500, "the turn ended without its last event", "server_error")


def _metric_code(error: OpenAIError) -> grpc.StatusCode:
    """The status a refused request counts as in the web port's metrics."""
    if error.native_code is not None:
        return error.native_code
    return grpc.StatusCode.INVALID_ARGUMENT if error.status < 500 else grpc.StatusCode.INTERNAL


async def _send(response: web.StreamResponse, event: dict[str, Any]) -> None:
    await response.write(b"data: " + _json(event).encode() + b"\n\n")


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _error_response(error: OpenAIError, cors: dict[str, str]) -> web.Response:
    return web.Response(
        status=error.status,
        text=error.json(),
        content_type="application/json",
        headers={**cors, **error.headers},
    )

"""``/v1/messages`` and ``/v1/messages/count_tokens`` on the web port, each request one
native call (chat_http.front says how it is made): StreamChat, CountTokens.

The credential is the SDKs' ``x-api-key`` or an ``Authorization: Bearer`` token, passed
on as the native call's ``authorization``. ``anthropic-version`` is required, as
Anthropic requires it; every version is answered alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import grpc
from aiohttp import web

from contextd.fronts.anthropic.count import count, count_request, count_thinking
from contextd.fronts.anthropic.errors import error_body
from contextd.fronts.anthropic.request import MessagesRequest, translate
from contextd.fronts.anthropic.response import (
    REPORT_HEADER,
    REQUEST_ID_HEADER,
    Reply,
    text_delta,
    text_start,
)
from contextd.fronts.chat_http.failure import HttpFailure
from contextd.fronts.chat_http.front import ModelFront, TurnCall, json_text, turn_completed
from contextd.fronts.chat_http.turn import SESSION_ID_HEADER
from contextd.fronts.web.gateway import WebGateway
from contextd.v1 import chat_pb2 as cpb

VERSION_HEADER = "anthropic-version"
_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}")
_API_KEY = "x-api-key"


class AnthropicRoutes(ModelFront):
    """Anthropic's Messages API, mounted on a WebGateway (``mounts=[routes]``)."""

    protocol = "anthropic"  # its name in the web port's metrics
    exposed_headers = (
        f"{SESSION_ID_HEADER}, {REPORT_HEADER}, {REQUEST_ID_HEADER}, X-Should-Retry, Retry-After"
    )

    def __call__(self, gateway: WebGateway) -> Iterable[web.RouteDef]:
        self.attach(gateway)
        return [
            web.post("/v1/messages", self._messages),
            web.post("/v1/messages/count_tokens", self._count_tokens),
        ]

    def error_body(self, failure: HttpFailure) -> dict[str, object]:
        return error_body(failure, failure.headers.get(REQUEST_ID_HEADER))

    def credential(self, request: web.Request) -> list[str]:
        """``Authorization`` as it is, else ``x-api-key`` as a bearer token (an SDK given
        both a key and a token sends both: the token wins)."""
        bearer = list(request.headers.getall("authorization", ()))
        return bearer or [f"Bearer {key}" for key in request.headers.getall(_API_KEY, ())]

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        def prepared(body: bytes, r: web.Request) -> _Turn:
            _check_version(r)
            return _Turn(self, translate(body, r.headers))

        return await self.run_turn(request, prepared)

    async def _count_tokens(self, request: web.Request) -> web.Response:
        cors = self.cors(request)
        if isinstance(cors, web.Response):
            return cors
        body = b""
        code = grpc.StatusCode.OK
        called = False
        try:
            body = await self.read(request)
            _check_version(request)
            counting = count_request(body)
            called = True
            answer = await count(self.context, counting, self.metadata(request))
            return web.json_response(answer, headers=cors)
        except HttpFailure as error:
            failure = error if called else await self.refused_first(request, error)
            code = failure.metric_code
            return self.error_response(failure, cors)
        finally:
            self.gateway.release(body)
            self.count(code)


def _check_version(request: web.Request) -> None:
    version = request.headers.get(VERSION_HEADER)
    if version is None:
        raise HttpFailure(400, f"{VERSION_HEADER}: header is required", VERSION_HEADER)
    if not _VERSION.fullmatch(version.strip()):
        raise HttpFailure(400, f"{VERSION_HEADER}: expected a date (2023-06-01)", VERSION_HEADER)


class _Turn:
    """A Messages request run as a native turn."""

    def __init__(self, front: AnthropicRoutes, messages: MessagesRequest) -> None:
        self.front = front
        self.request = messages
        self.native = messages.native
        self.params = messages.params

    async def answer(
        self, request: web.Request, cors: dict[str, str], call: TurnCall, started: cpb.TurnStarted
    ) -> web.StreamResponse:
        # Thinking left out is reported with its tokens, counted as the turn counts.
        context, thinking = self.front.context, self.request.thinking
        tokenizer, metadata = started.context.tokenizer, self.front.metadata(request)
        await count_thinking(context, thinking, tokenizer, metadata)
        reply = Reply(self.request, started)
        if self.request.stream:
            return await self._stream(request, cors, call, reply)
        done = await turn_completed(call, self.params, on_delta=None)
        failure = reply.failure(done)
        if failure is not None:
            raise failure
        return web.Response(
            text=json_text(reply.whole(done)),
            content_type="application/json",
            headers={**cors, **reply.headers()},
        )

    async def _stream(
        self, request: web.Request, cors: dict[str, str], call: TurnCall, reply: Reply
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                **cors,
                **reply.headers(),
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
            }
        )
        await response.prepare(request)
        await _send(response, *reply.opening())
        blocks = 0

        async def on_delta(text: str) -> None:
            nonlocal blocks
            if not text:
                return
            if blocks:
                await _send(response, text_delta(text))
                return
            # The block's start and its first text in one write: one packet to wait for.
            await _send(response, text_start(), text_delta(text))
            blocks = 1

        try:
            done = await turn_completed(call, self.params, on_delta)
        except HttpFailure as error:
            # Too late for a status: the SDKs raise an error event as the call's error.
            await _send(response, ("error", self.front.error_body(error)))
            return response
        failed = reply.failure(done)
        if failed is not None:
            await _send(response, ("error", self.front.error_body(failed)))
            return response
        await _send(response, *reply.ending(done, blocks))
        await response.write_eof()
        return response


async def _send(response: web.StreamResponse, *events: tuple[str, dict[str, Any]]) -> None:
    """Server-sent events, in one write."""
    text = "".join(f"event: {name}\ndata: {json_text(event)}\n\n" for name, event in events)
    await response.write(text.encode())

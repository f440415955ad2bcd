"""``/v1/messages`` and ``/v1/messages/count_tokens`` on the web port, each request one
native call (chat_http.front says how it is made): StreamChat, CountTokens.

The credential is the SDKs' ``x-api-key`` or an ``Authorization: Bearer`` token, passed
on as the native call's ``authorization``. ``anthropic-version`` is required, as
Anthropic requires it; every version is answered alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from aiohttp import web

from contextd.fronts.anthropic.count import count, count_request, count_thinking
from contextd.fronts.anthropic.errors import error_body
from contextd.fronts.anthropic.request import translate
from contextd.fronts.anthropic.response import (
    REPORT_HEADER,
    REQUEST_ID_HEADER,
    Reply,
    text_delta,
    text_start,
)
from contextd.fronts.chat_http.answer import AnsweredTurn, events, json_answer
from contextd.fronts.chat_http.failure import HttpFailure
from contextd.fronts.chat_http.front import ModelFront
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
        def prepared(body: bytes, r: web.Request) -> AnsweredTurn:
            _check_version(r)
            asked = translate(body, r.headers)

            async def answering(
                r: web.Request, started: cpb.TurnStarted
            ) -> tuple[Reply, _Events | None]:
                # Thinking left out is reported with its tokens, counted as the turn counts.
                tokenizer, metadata = started.context.tokenizer, self.metadata(r)
                await count_thinking(self.context, asked.thinking, tokenizer, metadata)
                reply = Reply(asked, started)
                return reply, _Events(reply, self.error_body) if asked.stream else None

            return AnsweredTurn(asked.native, asked.params, answering)

        return await self.run_turn(request, prepared)

    async def _count_tokens(self, request: web.Request) -> web.Response:
        async def counted() -> dict[str, Any]:
            body = b""
            called = False
            try:
                body = await self.read(request)
                _check_version(request)
                counting = count_request(body)
                called = True
                return await count(self.context, counting, self.metadata(request))
            except HttpFailure as error:
                raise (error if called else await self.refused_first(request, error)) from None
            finally:
                self.gateway.release(body)

        return await json_answer(self, request, counted)


def _check_version(request: web.Request) -> None:
    version = request.headers.get(VERSION_HEADER)
    if version is None:
        raise HttpFailure(400, f"{VERSION_HEADER}: header is required", VERSION_HEADER)
    if not _VERSION.fullmatch(version.strip()):
        raise HttpFailure(400, f"{VERSION_HEADER}: expected a date (2023-06-01)", VERSION_HEADER)


class _Events:
    """The Messages API's stream: the text as the first content block, then ``reply``'s
    ending; a failure as an ``error`` event."""

    def __init__(self, reply: Reply, error_body: Callable[[HttpFailure], dict[str, object]]):
        self.reply = reply
        self.error_body = error_body
        self.blocks = 0

    def opening(self) -> bytes:
        return events(self.reply.opening())

    def delta(self, text: str) -> bytes:
        if not text:
            return b""
        if self.blocks:
            return events([text_delta(text)])
        # The block's start and its first text in one write: one packet to wait for.
        self.blocks = 1
        return events([text_start(), text_delta(text)])

    def failed(self, failure: HttpFailure) -> bytes:
        return events([("error", self.error_body(failure))])

    def closing(self, done: cpb.TurnCompleted) -> bytes:
        return events(self.reply.ending(done, self.blocks))

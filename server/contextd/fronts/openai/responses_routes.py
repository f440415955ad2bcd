"""``POST /v1/responses``, ``GET`` and ``DELETE /v1/responses/{id}``: the Responses API
over the same native calls as Chat Completions (StreamChat; ListMessages to retrieve a
response, DeleteSession to delete one), through the OpenAI front's shared machinery
(chat_http.front).

A response lives in its contextd session: retrieving it reads the session's messages
(its answer, with the model, usage and request parameters kept with it), and deleting
it deletes that session (every response of the conversation with it).
"""

from __future__ import annotations

from typing import Any

import grpc
import grpc.aio
from aiohttp import web

from contextd.fronts.chat_http.answer import AnsweredTurn, events, json_answer
from contextd.fronts.chat_http.failure import HttpFailure, from_rpc_error
from contextd.fronts.chat_http.front import ModelFront
from contextd.fronts.openai.response_ids import ResponseId
from contextd.fronts.openai.responses_output import (
    SERVER_TOOLS,
    ResponseBuilder,
    stored_response,
)
from contextd.fronts.openai.responses_request import translate
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2, sessions_pb2_grpc

_PAGE = 500


class ResponsesRoutes:
    """Handlers of the Responses API on ``front`` (the OpenAI front, already attached)."""

    def __init__(self, front: ModelFront) -> None:
        self._front = front
        self._sessions = sessions_pb2_grpc.SessionServiceStub(front.gateway.channel)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/responses", self._create),
            web.get("/v1/responses/{id}", self._retrieve),
            web.delete("/v1/responses/{id}", self._delete),
        ]

    async def _create(self, request: web.Request) -> web.StreamResponse:
        def prepared(body: bytes, _: web.Request) -> AnsweredTurn:
            asked = translate(body)

            async def answering(
                _: web.Request, started: cpb.TurnStarted
            ) -> tuple[ResponseBuilder, _Events | None]:
                builder = ResponseBuilder(asked, started)
                return builder, _Events(builder) if asked.stream else None

            return AnsweredTurn(asked.native, asked.params, answering)

        return await self._front.run_turn(request, prepared)

    async def _delete_session(self, request: web.Request, user_id: str, session_id: str) -> None:
        try:
            await self._sessions.DeleteSession(
                sessions_pb2.DeleteSessionRequest(user_id=user_id, session_id=session_id),
                metadata=self._front.metadata(request),
            )
        except grpc.aio.AioRpcError as error:
            if error.code() is grpc.StatusCode.NOT_FOUND:
                raise _not_found() from None
            raise from_rpc_error(error) from None

    async def _retrieve(self, request: web.Request) -> web.Response:
        return await self._by_id(request, delete=False)

    async def _delete(self, request: web.Request) -> web.Response:
        return await self._by_id(request, delete=True)

    async def _by_id(self, request: web.Request, *, delete: bool) -> web.Response:
        async def answer() -> dict[str, Any]:
            text = request.match_info["id"]
            found = ResponseId.parse(text)
            if found is None:
                refused = await self._front.credential_failure(request)
                raise refused or _not_found()
            stored = await self._answer(request, found)
            if not delete:
                return stored_response(text, stored)
            await self._delete_session(request, found.user_id, found.session_id)
            return {"id": text, "object": "response", "deleted": True}

        return await json_answer(self._front, request, answer)

    async def _answer(self, request: web.Request, found: ResponseId) -> sessions_pb2.SessionMessage:
        """The stored answer that ended the response, from the session's messages: the
        assistant messages of its turn after its start (the user message, or the result of
        the call it went on from), up to the one that ended it."""
        messages: list[sessions_pb2.SessionMessage] = []
        token = ""
        while True:
            try:
                page = await self._sessions.ListMessages(
                    sessions_pb2.ListMessagesRequest(
                        user_id=found.user_id,
                        session_id=found.session_id,
                        page_size=_PAGE,
                        page_token=token,
                    ),
                    metadata=self._front.metadata(request),
                )
            except grpc.aio.AioRpcError as error:
                if error.code() is grpc.StatusCode.NOT_FOUND:
                    raise _not_found() from None
                raise from_rpc_error(error) from None
            messages += [m for m in page.messages if m.turn_index == found.turn_index]
            token = page.next_page_token
            if not token:
                break
        start = 0
        if found.after_call:
            start = next(
                (
                    k + 1
                    for k, m in enumerate(messages)
                    if m.message.tool_call_id == found.after_call
                ),
                -1,
            )
        answer = None
        for m in messages[start:] if start >= 0 else ():
            if m.message.role != pb.ROLE_ASSISTANT:
                continue
            answer = m
            if any(c.name not in SERVER_TOOLS for c in m.message.tool_calls):
                break  # it called the host's tools: the response ended there
        if answer is None:
            raise _not_found()
        return answer


class _Events:
    """The Responses API's stream: ``builder``'s events, each named by its type."""

    def __init__(self, builder: ResponseBuilder) -> None:
        self.builder = builder

    def opening(self) -> bytes:
        return _named(self.builder.opening())

    def delta(self, text: str) -> bytes:
        return _named(self.builder.delta(text))

    def failed(self, failure: HttpFailure) -> bytes:
        return _named([self.builder.failed(failure.message, failure.code or "server_error")])

    def closing(self, done: cpb.TurnCompleted) -> bytes:
        return _named(self.builder.closing(done))


def _not_found() -> HttpFailure:
    return HttpFailure(404, "No response with that id.", code="not_found")


def _named(written: list[dict[str, Any]]) -> bytes:
    return events((event["type"], event) for event in written)

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

from contextd.fronts.chat_http.failure import HttpFailure, from_rpc_error
from contextd.fronts.chat_http.front import ModelFront, TurnCall, json_text, turn_completed
from contextd.fronts.openai.response_ids import ResponseId
from contextd.fronts.openai.responses_output import (
    SERVER_TOOLS,
    ResponseBuilder,
    stored_response,
)
from contextd.fronts.openai.responses_request import ResponsesRequest, translate
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
        return await self._front.run_turn(
            request, lambda body, _: _ResponseTurn(self, translate(body))
        )

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
        front = self._front
        cors = front.cors(request)
        if isinstance(cors, web.Response):
            return cors
        code = grpc.StatusCode.OK
        try:
            text = request.match_info["id"]
            found = ResponseId.parse(text)
            if found is None:
                refused = await front.credential_failure(request)
                raise refused or _not_found()
            stored = await self._answer(request, found)
            if delete:
                await self._delete_session(request, found.user_id, found.session_id)
                answer: dict[str, Any] = {"id": text, "object": "response", "deleted": True}
            else:
                answer = stored_response(text, stored)
            return web.json_response(answer, headers=cors)
        except HttpFailure as failure:
            code = failure.metric_code
            return front.error_response(failure, cors)
        finally:
            front.count(code)

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


class _ResponseTurn:
    """A Responses API request run as a native turn."""

    def __init__(self, routes: ResponsesRoutes, asked: ResponsesRequest) -> None:
        self.routes = routes
        self.asked = asked
        self.native = asked.native
        self.params = asked.params

    async def answer(
        self, request: web.Request, cors: dict[str, str], call: TurnCall, started: cpb.TurnStarted
    ) -> web.StreamResponse:
        builder = ResponseBuilder(self.asked, started)
        if self.asked.stream:
            return await self._stream(request, cors, call, builder)
        done = await turn_completed(call, self.params, on_delta=None)
        failure = builder.completion.failure(done)
        if failure is not None:
            raise failure
        return web.Response(
            text=json_text(builder.whole(done)),
            content_type="application/json",
            headers={**cors, **builder.headers()},
        )

    async def _stream(
        self, request: web.Request, cors: dict[str, str], call: TurnCall, builder: ResponseBuilder
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                **cors,
                **builder.headers(),
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
            }
        )
        await response.prepare(request)
        for event in builder.opening():
            await _send(response, event)

        async def on_delta(text: str) -> None:
            for event in builder.delta(text):
                await _send(response, event)

        try:
            done = await turn_completed(call, self.params, on_delta)
        except HttpFailure as error:
            await _send(response, builder.failed(error.message, error.code or "server_error"))
            return response
        failure = builder.completion.failure(done)
        if failure is not None:
            await _send(response, builder.failed(failure.message, failure.code or "server_error"))
            return response
        for event in builder.closing(done):
            await _send(response, event)
        await response.write_eof()
        return response


def _not_found() -> HttpFailure:
    return HttpFailure(404, "No response with that id.", code="not_found")


async def _send(response: web.StreamResponse, event: dict[str, Any]) -> None:
    await response.write(
        b"event: " + event["type"].encode() + b"\ndata: " + json_text(event).encode() + b"\n\n"
    )

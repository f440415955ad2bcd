"""``POST /v1/responses``, ``GET`` and ``DELETE /v1/responses/{id}``: the Responses API
over the same native calls as Chat Completions (StreamChat; ListMessages to retrieve a
response, DeleteSession to delete one), with the caller's credential passed on.

A response lives in its contextd session: retrieving it reads the session's messages,
and deleting it deletes that session (every response of the conversation with it).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio
from aiohttp import web

from contextd.fronts.openai.calls import PROTOCOL, completed, dumps, error_response, metric_code
from contextd.fronts.openai.errors import OpenAIError, from_rpc_error
from contextd.fronts.openai.request import parse_body
from contextd.fronts.openai.response_ids import ResponseId
from contextd.fronts.openai.responses_output import (
    ResponseBuilder,
    call_item,
    message_item,
    response_object,
)
from contextd.fronts.openai.responses_request import ResponsesRequest, translate
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, sessions_pb2, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb

if TYPE_CHECKING:
    from contextd.fronts.openai.routes import OpenAIRoutes

_PAGE = 500
# The server's own tools: their calls are not the host's to see.
_SERVER_TOOLS = frozenset({"memory_search", "recall_tool_result"})


class ResponsesRoutes:
    """Handlers of the Responses API; ``front`` holds what every /v1 route shares."""

    def __init__(self, front: OpenAIRoutes) -> None:
        self._front = front
        gateway = front.gateway
        self._chat = chat_pb2_grpc.ChatServiceStub(gateway.channel)
        self._sessions = sessions_pb2_grpc.SessionServiceStub(gateway.channel)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/responses", self._create),
            web.get("/v1/responses/{id}", self._retrieve),
            web.delete("/v1/responses/{id}", self._delete),
        ]

    async def _create(self, request: web.Request) -> web.StreamResponse:
        front = self._front
        cors = front.cors(request)
        if isinstance(cors, web.Response):
            return cors
        body = b""
        call: grpc.aio.UnaryStreamCall[cpb.StreamChatRequest, cpb.StreamChatResponse] | None
        call = None
        code = grpc.StatusCode.OK
        try:
            body = await front.read(request)
            asked = translate(parse_body(body))
            call = self._chat.StreamChat(asked.native, metadata=front.metadata(request))
            started = await front.turn_started(call, asked.params)
            builder = ResponseBuilder(asked, started)
            if asked.stream:
                return await self._stream(request, cors, call, asked, builder)
            return await self._whole(request, cors, call, asked, builder)
        except OpenAIError as error:
            answer = error
            if call is None:
                refused = await front.credential_error(request)
                if refused is not None and refused.status == 401:
                    answer = refused
            code = metric_code(answer)
            return error_response(answer, cors)
        except (ConnectionResetError, asyncio.CancelledError):
            code = grpc.StatusCode.CANCELLED
            raise asyncio.CancelledError from None
        finally:
            if call is not None:
                call.cancel()
            front.gateway.release(body)
            if front.gateway.count is not None:
                front.gateway.count(PROTOCOL, code)

    async def _whole(
        self,
        request: web.Request,
        cors: dict[str, str],
        call: grpc.aio.UnaryStreamCall[cpb.StreamChatRequest, cpb.StreamChatResponse],
        asked: ResponsesRequest,
        builder: ResponseBuilder,
    ) -> web.Response:
        done = await completed(call, asked.params, on_delta=None)
        failure = builder.completion.failure(done)
        if failure is not None:
            raise failure
        await self._forget_unstored(request, asked, builder)
        return web.Response(
            text=dumps(builder.whole(done)),
            content_type="application/json",
            headers={**cors, **builder.headers()},
        )

    async def _stream(
        self,
        request: web.Request,
        cors: dict[str, str],
        call: grpc.aio.UnaryStreamCall[cpb.StreamChatRequest, cpb.StreamChatResponse],
        asked: ResponsesRequest,
        builder: ResponseBuilder,
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
            done = await completed(call, asked.params, on_delta)
        except OpenAIError as error:
            await _send(response, builder.failed(error.message, error.code or error.type))
            return response
        failure = builder.completion.failure(done)
        if failure is not None:
            await _send(response, builder.failed(failure.message, failure.code or failure.type))
            return response
        await self._forget_unstored(request, asked, builder)
        for event in builder.closing(done):
            await _send(response, event)
        await response.write_eof()
        return response

    async def _forget_unstored(
        self, request: web.Request, asked: ResponsesRequest, builder: ResponseBuilder
    ) -> None:
        """``store: false``: the inline turn's session goes once it is answered."""
        if asked.store:
            return
        started = builder.started
        try:
            await self._sessions.DeleteSession(
                sessions_pb2.DeleteSessionRequest(
                    user_id=asked.native.session.user_id, session_id=started.session_id
                ),
                metadata=self._front.metadata(request),
            )
        except grpc.aio.AioRpcError as error:
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
                refused = await front.credential_error(request)
                raise refused or _not_found()
            metadata = front.metadata(request)
            output = await self._output(found, metadata)
            if delete:
                try:
                    await self._sessions.DeleteSession(
                        sessions_pb2.DeleteSessionRequest(
                            user_id=found.user_id, session_id=found.session_id
                        ),
                        metadata=metadata,
                    )
                except grpc.aio.AioRpcError as error:
                    raise from_rpc_error(error) from None
                answer: dict[str, Any] = {"id": text, "object": "response", "deleted": True}
            else:
                answer = response_object(text, "", output[0], "completed", output[1], None, None)
            return web.json_response(answer, headers=cors)
        except OpenAIError as error:
            code = metric_code(error)
            return error_response(error, cors)
        finally:
            if front.gateway.count is not None:
                front.gateway.count(PROTOCOL, code)

    async def _output(
        self, found: ResponseId, metadata: grpc.aio.Metadata
    ) -> tuple[int, list[dict[str, Any]]]:
        """The response's creation time and output, from the session's stored messages:
        the assistant messages of its turn after its start (the user message, or the
        result of the call it went on from), up to the one that ended it."""
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
                    metadata=metadata,
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
        for m in messages[max(start, 0) :] if start >= 0 else ():
            if m.message.role != pb.ROLE_ASSISTANT:
                continue
            answer = m
            if any(c.name not in _SERVER_TOOLS for c in m.message.tool_calls):
                break  # it called the host's tools: the response ended there
        if answer is None:
            raise _not_found()
        output: list[dict[str, Any]] = []
        host_calls = [c for c in answer.message.tool_calls if c.name not in _SERVER_TOOLS]
        if answer.message.content or not host_calls:
            output.append(message_item("msg_" + answer.message.id, answer.message.content))
        output.extend(call_item(c) for c in host_calls)
        return answer.create_time.seconds, output


def _not_found() -> OpenAIError:
    return OpenAIError(404, "No response with that id.", code="not_found")


async def _send(response: web.StreamResponse, event: dict[str, Any]) -> None:
    await response.write(
        b"event: " + event["type"].encode() + b"\ndata: " + dumps(event).encode() + b"\n\n"
    )

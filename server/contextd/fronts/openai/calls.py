"""What every /v1 route shares: reading a turn's native events, sending JSON and
server-sent events, and answering with an error."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import grpc.aio
from aiohttp import web

from contextd.fronts.openai.errors import OpenAIError, from_rpc_error
from contextd.fronts.openai.params import ParamMap
from contextd.v1 import chat_pb2 as cpb

PROTOCOL = "openai"  # its name in the web port's metrics


async def completed(
    call: grpc.aio.UnaryStreamCall[cpb.StreamChatRequest, cpb.StreamChatResponse],
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
                return event.turn_completed
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error, params) from None
    raise OpenAIError(500, "the turn ended without its last event", "server_error")


def metric_code(error: OpenAIError) -> grpc.StatusCode:
    """The status a refused request counts as in the web port's metrics."""
    if error.native_code is not None:
        return error.native_code
    return grpc.StatusCode.INVALID_ARGUMENT if error.status < 500 else grpc.StatusCode.INTERNAL


async def send(response: web.StreamResponse, event: dict[str, Any]) -> None:
    await response.write(b"data: " + dumps(event).encode() + b"\n\n")


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def error_response(error: OpenAIError, cors: dict[str, str]) -> web.Response:
    return web.Response(
        status=error.status,
        text=error.json(),
        content_type="application/json",
        headers={**cors, **error.headers},
    )

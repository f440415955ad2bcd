"""Addresses, service names and helpers for tests of the web port."""

from __future__ import annotations

import uuid

import aiohttp
import grpc
import grpc.aio
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb

from tests.support.grpc_web import (
    call,
)

ALLOWED = "https://addin.example.com"


ALLOWED_LOCAL = "http://localhost:3000"


MAX_MESSAGE = 1024 * 1024


CTX = "contextd.v1.ContextService"


SES = "contextd.v1.SessionService"


MEM = "contextd.v1.MemoryService"


PRM = "contextd.v1.PromptService"


CHAT = "contextd.v1.ChatService/StreamChat"


def new_user() -> str:
    return f"web-{uuid.uuid4().hex[:8]}"


async def chat_turn(
    http: aiohttp.ClientSession, web: str, user: str, text: str, session_id: str = ""
) -> list[cpb.StreamChatResponse]:
    request = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=session_id), user_message=text
    )
    reply = await call(http, web, CHAT, request)
    assert reply.code == grpc.StatusCode.OK, reply.message
    return reply.decode(cpb.StreamChatResponse)


def kinds(events: list[cpb.StreamChatResponse]) -> list[str]:
    return [str(e.WhichOneof("event")) for e in events]

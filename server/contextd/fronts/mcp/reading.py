"""What a host reads rather than a model calls: the resource template of a session's
messages, and the prompt "what do you remember about me".

A resource that is not there (an unknown session, another user's, a URI of no template)
is the protocol's "resource not found": -32002 for the handshake versions (2025-03-26
to 2025-11-25), -32602 (invalid params) from 2026-07-28 on, where the specification
moved it; the error's data names the URI.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import grpc
import grpc.aio
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import Field

from contextd.fronts.mcp import shapes
from contextd.fronts.mcp.native import CallerOf, Native, Refusals
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

MESSAGES_URI = "contextd://sessions/{session_id}/messages"
# A resource read gives at most this many messages (the newest are in read_session).
RESOURCE_MESSAGES = 1000
# The handshake versions' code for a resource that is not there.
RESOURCE_NOT_FOUND = -32002
# The prompt lists at most this many memories.
PROMPT_MEMORIES = 50


def not_found_code(ctx: Context) -> int:
    version = ctx.request_context.protocol_version
    return RESOURCE_NOT_FOUND if version in HANDSHAKE_PROTOCOL_VERSIONS else INVALID_PARAMS


def register(server: MCPServer, native: Native, caller_of: CallerOf, r: Refusals) -> None:
    sessions = native.sessions

    @server.resource(
        MESSAGES_URI,
        title="A session's messages",
        description="A session's messages, oldest first (at most the first 1000), as one "
        "JSON document: session_id, messages, and complete (false when there are more).",
        mime_type="application/json",
    )
    async def session_messages(session_id: str, ctx: Context) -> str:
        caller = caller_of(ctx)
        messages: list[dict[str, Any]] = []
        token = ""
        while len(messages) < RESOURCE_MESSAGES:
            request = spb.ListMessagesRequest(
                user_id=caller.user_id, session_id=session_id, page_size=500, page_token=token
            )
            try:
                page = await sessions.ListMessages(request, metadata=caller.metadata())
            except grpc.aio.AioRpcError as failure:
                uri = MESSAGES_URI.format(session_id=session_id)
                raise protocol_error(ctx, failure, r, {"uri": uri[:200]}) from None
            messages += [shapes.session_message(m).model_dump() for m in page.messages]
            token = page.next_page_token
            if not token:
                break
        body = {
            "session_id": session_id,
            "messages": messages[:RESOURCE_MESSAGES],
            "complete": not token and len(messages) <= RESOURCE_MESSAGES,
        }
        return json.dumps(body, ensure_ascii=False)

    @server.prompt(
        title="What do you remember about me?",
        description="Ask the model what contextd remembers about the user (about one topic, "
        "or the newest memories), with the memories themselves, to confirm or correct.",
    )
    async def what_do_you_remember(
        ctx: Context,
        topic: Annotated[
            str, Field(description="only what concerns this; empty: everything, newest first")
        ] = "",
    ) -> str:
        caller = caller_of(ctx)
        try:
            if topic:
                request = mpb.SearchMemoriesRequest(
                    user_id=caller.user_id, query=topic, limit=PROMPT_MEMORIES
                )
                found = await native.memories.SearchMemories(request, metadata=caller.metadata())
                texts = [s.memory.content for s in found.results]
            else:
                listing = mpb.ListMemoriesRequest(user_id=caller.user_id, page_size=PROMPT_MEMORIES)
                page = await native.memories.ListMemories(listing, metadata=caller.metadata())
                texts = [m.content for m in page.memories]
        except grpc.aio.AioRpcError as failure:
            raise protocol_error(ctx, failure, r) from None
        about = f" about {topic}" if topic else ""
        if not texts:
            return f"What do you remember about me{about}? (contextd has no memories of me{about}.)"
        listed = "\n".join(f"- {text}" for text in texts)
        return (
            f"What do you remember about me{about}? Here is what contextd has stored:\n"
            f"{listed}\n"
            "Tell me in a few sentences, and ask me whether anything is wrong or out of date."
        )


def protocol_error(
    ctx: Context, failure: grpc.aio.AioRpcError, r: Refusals, data: Any = None
) -> MCPError:
    """A refused native call as the protocol's error: what is not there, the caller's
    mistake, or the server's."""
    if failure.code() == grpc.StatusCode.NOT_FOUND:
        return MCPError(not_found_code(ctx), r.text(failure), data)
    if failure.code() == grpc.StatusCode.INVALID_ARGUMENT:
        return MCPError(INVALID_PARAMS, r.text(failure), data)
    return MCPError(INTERNAL_ERROR, r.text(failure), data)

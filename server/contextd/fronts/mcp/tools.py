"""The MCP server's tools and resources, each a translation of native calls.

Tools: search, list, add, update and delete memories; create and list sessions, read a
session's messages, build the context for a question. Resource template:
``contextd://sessions/{session_id}/messages``. Every call acts for the caller the
transport names (see ``CallerOf``); a refused call is a tool error with the native
status, and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

import grpc
import grpc.aio
from google.protobuf.field_mask_pb2 import FieldMask
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from pydantic import Field

from contextd import __version__
from contextd.core.errors import cut
from contextd.fronts.caller import Caller
from contextd.fronts.mcp import shapes
from contextd.fronts.mcp.native import Native
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

# Who the call of a request acts for: from its HTTP headers, or the process's environment.
CallerOf = Callable[[Context], Caller]
T = TypeVar("T")

MESSAGES_URI = "contextd://sessions/{session_id}/messages"
# A resource read gives at most this many messages (the newest are in read_session).
RESOURCE_MESSAGES = 1000
_LONGEST_ERROR = 300
_FORMATS = {
    "neutral": pb.OUTPUT_FORMAT_NEUTRAL,
    "openai": pb.OUTPUT_FORMAT_OPENAI,
    "anthropic": pb.OUTPUT_FORMAT_ANTHROPIC,
}
INSTRUCTIONS = (
    "contextd keeps this user's conversations and what it remembers about them. "
    "Search memories before answering questions about the user; add a memory for a "
    "lasting fact or preference the user states."
)

SessionId = Annotated[str, Field(description="a session id, as list_sessions gives them")]
MemoryId = Annotated[str, Field(description="a memory id, as the memory tools give them")]
PageToken = Annotated[str, Field(description="from the previous page; empty for the first")]


async def _native(call: Awaitable[T], error: type[Exception] = ToolError) -> T:
    """The call's answer; a failed call becomes ``error`` with its status and message."""
    try:
        return await call
    except grpc.aio.AioRpcError as failure:
        raise error(_refusal(failure)) from None


def _refusal(failure: grpc.aio.AioRpcError) -> str:
    """The status and message of a failed call, bounded: a message may quote an id the
    caller sent, of any length."""
    return cut(f"{failure.code().name}: {failure.details() or ''}", _LONGEST_ERROR)


def build_server(native: Native, caller_of: CallerOf) -> MCPServer:
    """The MCP server whose tools call ``native`` as ``caller_of`` says."""
    server = MCPServer(
        "contextd", instructions=INSTRUCTIONS, version=__version__, warn_on_duplicate_tools=False
    )

    def md(ctx: Context) -> tuple[Caller, tuple[tuple[str, str], ...]]:
        caller = caller_of(ctx)
        return caller, caller.metadata()

    @server.tool()
    async def search_memories(
        query: Annotated[str, Field(description="what to look for, in any words")],
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=100, description="most results")] = 10,
    ) -> dict[str, Any]:
        """Search the user's memories: the most relevant first, by terms (Chinese and
        English) and recency."""
        caller, metadata = md(ctx)
        request = mpb.SearchMemoriesRequest(user_id=caller.user_id, query=query, limit=limit)
        found = await _native(native.memories.SearchMemories(request, metadata=metadata))
        out: dict[str, Any] = {"memories": [shapes.scored_memory(s) for s in found.results]}
        if found.note:
            out["note"] = found.note
        return out

    @server.tool()
    async def list_memories(
        ctx: Context,
        page_size: Annotated[int, Field(ge=1, le=200)] = 50,
        page_token: PageToken = "",
    ) -> dict[str, Any]:
        """List the user's memories, newest first."""
        caller, metadata = md(ctx)
        request = mpb.ListMemoriesRequest(
            user_id=caller.user_id, page_size=page_size, page_token=page_token
        )
        found = await _native(native.memories.ListMemories(request, metadata=metadata))
        return {
            "memories": [shapes.memory(m) for m in found.memories],
            "next_page_token": found.next_page_token,
        }

    @server.tool()
    async def add_memory(
        content: Annotated[str, Field(description="one fact or preference, in a sentence")],
        ctx: Context,
    ) -> dict[str, Any]:
        """Remember a fact about the user. The same text is stored once."""
        caller, metadata = md(ctx)
        request = mpb.AddMemoryRequest(user_id=caller.user_id, content=content)
        added = await _native(native.memories.AddMemory(request, metadata=metadata))
        return {"memory": shapes.memory(added.memory), "created": added.created}

    @server.tool()
    async def update_memory(
        memory_id: MemoryId,
        content: str,
        ctx: Context,
        supersede: Annotated[
            bool,
            Field(
                description="the fact changed (the old text stays a fact of the past); "
                "false: a correction"
            ),
        ] = False,
    ) -> dict[str, Any]:
        """Change a memory's text; it keeps its id, and its old text is kept in its
        history."""
        caller, metadata = md(ctx)
        request = mpb.UpdateMemoryRequest(
            user_id=caller.user_id,
            memory_id=memory_id,
            memory=mpb.Memory(content=content),
            update_mask=FieldMask(paths=["content"]),
            supersede=supersede,
        )
        updated = await _native(native.memories.UpdateMemory(request, metadata=metadata))
        return {"memory": shapes.memory(updated.memory)}

    @server.tool()
    async def delete_memory(memory_id: MemoryId, ctx: Context) -> dict[str, Any]:
        """Forget one of the user's memories."""
        caller, metadata = md(ctx)
        request = mpb.DeleteMemoryRequest(user_id=caller.user_id, memory_id=memory_id)
        await _native(native.memories.DeleteMemory(request, metadata=metadata))
        return {"deleted": memory_id}

    @server.tool()
    async def create_session(
        ctx: Context,
        title: str = "",
        scenario: Annotated[str, Field(description="whose prompt template applies")] = "",
        host: Annotated[str, Field(description="the host application, e.g. vscode")] = "",
    ) -> dict[str, Any]:
        """Start a new session of the user (its id is what build_context needs)."""
        caller, metadata = md(ctx)
        request = spb.CreateSessionRequest(
            user_id=caller.user_id, title=title, scenario=scenario, host=host
        )
        created = await _native(native.sessions.CreateSession(request, metadata=metadata))
        return {"session": shapes.session(created.session)}

    @server.tool()
    async def list_sessions(
        ctx: Context,
        page_size: Annotated[int, Field(ge=1, le=200)] = 20,
        page_token: PageToken = "",
    ) -> dict[str, Any]:
        """The user's sessions, most recently active first."""
        caller, metadata = md(ctx)
        request = spb.ListSessionsRequest(
            user_id=caller.user_id, page_size=page_size, page_token=page_token
        )
        found = await _native(native.sessions.ListSessions(request, metadata=metadata))
        return {
            "sessions": [shapes.session(s) for s in found.sessions],
            "next_page_token": found.next_page_token,
        }

    @server.tool()
    async def read_session(
        session_id: SessionId,
        ctx: Context,
        page_size: Annotated[int, Field(ge=1, le=500)] = 100,
        page_token: PageToken = "",
    ) -> dict[str, Any]:
        """A session's messages, oldest first."""
        caller, metadata = md(ctx)
        request = spb.ListMessagesRequest(
            user_id=caller.user_id,
            session_id=session_id,
            page_size=page_size,
            page_token=page_token,
        )
        found = await _native(native.sessions.ListMessages(request, metadata=metadata))
        return {
            "messages": [shapes.session_message(m) for m in found.messages],
            "next_page_token": found.next_page_token,
        }

    @server.tool()
    async def build_context(
        question: Annotated[str, Field(description="the user's message to answer")],
        session_id: SessionId,
        ctx: Context,
        token_budget: Annotated[int, Field(ge=1, description="most tokens of the list")] = 4000,
        output_format: Literal["neutral", "openai", "anthropic"] = "neutral",
    ) -> dict[str, Any]:
        """The messages a model should see to answer a question in a session: the system
        prompt with the user's relevant memories and recent sessions, the session's
        latest messages fitted to the budget, and the question; with the report of what
        was kept and dropped. Nothing is stored."""
        caller, metadata = md(ctx)
        request = pb.BuildMessagesRequest(
            session=pb.SessionContext(user_id=caller.user_id, session_id=session_id),
            user_message=question,
            token_budget=token_budget,
            output_format=_FORMATS[output_format],
        )
        built = await _native(native.context.BuildMessages(request, metadata=metadata))
        out: dict[str, Any] = {
            "messages": [shapes.message(m) for m in built.messages],
            "report": shapes.as_json(built.report),
        }
        if built.payload_json:
            out["payload"] = json.loads(built.payload_json)
        return out

    @server.resource(MESSAGES_URI, mime_type="application/json")
    async def session_messages(session_id: str, ctx: Context) -> str:
        """A session's messages, oldest first (at most the first 1000)."""
        caller, metadata = md(ctx)
        messages: list[dict[str, Any]] = []
        token = ""
        while len(messages) < RESOURCE_MESSAGES:
            request = spb.ListMessagesRequest(
                user_id=caller.user_id, session_id=session_id, page_size=500, page_token=token
            )
            page = await _native(
                native.sessions.ListMessages(request, metadata=metadata), ResourceError
            )
            messages += [shapes.session_message(m) for m in page.messages]
            token = page.next_page_token
            if not token:
                break
        body = {
            "session_id": session_id,
            "messages": messages[:RESOURCE_MESSAGES],
            "complete": not token and len(messages) <= RESOURCE_MESSAGES,
        }
        return json.dumps(body, ensure_ascii=False)

    return server

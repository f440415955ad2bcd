"""The MCP server's tools, each a translation of native calls, with the hints a model
and its host choose by (a title, whether it only reads, destroys, may be repeated) and
the schema of what it returns.

Tools: search, list, add, update and delete memories; create and list sessions, read a
session's messages, build the context for a question. Every call acts for the caller
the transport names (see ``CallerOf``); a refused call is a tool error with the native
status, and changes nothing. The resource and the prompt are in ``reading``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Literal

from google.protobuf.field_mask_pb2 import FieldMask
from mcp.server.caching import CacheHint
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import AnyUrl, Field, ValidationError

from contextd import __version__
from contextd.fronts.mcp import arguments as args
from contextd.fronts.mcp import reading, shapes
from contextd.fronts.mcp.native import CallerOf, Native, Refusals
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

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
# The lists of tools, prompts and templates are the same for every caller and change
# only with the server's version: a client may keep them this long.
LISTS_FRESH_MS = 3_600_000
_CACHED = CacheHint(ttl_ms=LISTS_FRESH_MS, scope="public")

SessionId = Annotated[str, Field(description="a session id, as list_sessions gives them")]
MemoryId = Annotated[str, Field(description="a memory id, as the memory tools give them")]
PageToken = Annotated[str, Field(description="from the previous page; empty for the first")]
Filter = Annotated[
    args.FilterArg | None,
    Field(description="which memories: agent, app, metadata, times, as_of; unset: all true now"),
]


class ContextdMCP(MCPServer):
    """The SDK's server, telling refused tool arguments in plain words, and answering
    a URI of no template as a resource not found."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if isinstance(error.__cause__, ValidationError):
                raise ToolError(args.plain(name, error.__cause__)) from error.__cause__
            raise

    async def read_resource(
        self, uri: AnyUrl | str, context: Context | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError:
            if context is None:
                raise
            code = reading.not_found_code(context)
            raise MCPError(code, "no resource with this URI", {"uri": str(uri)[:200]}) from None


def build_server(native: Native, caller_of: CallerOf, user_source: str) -> ContextdMCP:
    """The MCP server whose tools call ``native`` as ``caller_of`` says; ``user_source``
    names where a user comes from, for the error of a missing one."""
    lists: Mapping[Any, CacheHint] = {
        "tools/list": _CACHED,
        "prompts/list": _CACHED,
        "resources/list": _CACHED,
        "resources/templates/list": _CACHED,
    }
    server = ContextdMCP(
        "contextd",
        title="contextd",
        instructions=INSTRUCTIONS,
        version=__version__,
        warn_on_duplicate_tools=False,
        cache_hints=lists,
    )
    refusals = Refusals(user_source)
    _memory_tools(server, native, caller_of, refusals)
    _session_tools(server, native, caller_of, refusals)
    reading.register(server, native, caller_of, refusals)
    return server


def _register(
    server: MCPServer,
    fn: Callable[..., Any],
    title: str,
    *,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
) -> None:
    """``fn`` as a tool: its docstring (without the source's indentation) describes it,
    its return type is its output schema; contextd is a closed world (its own store)."""
    hints = ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=read_only or idempotent,
        open_world_hint=False,
    )
    description = inspect.cleandoc(fn.__doc__ or "")
    server.add_tool(
        fn, title=title, description=description, annotations=hints, structured_output=True
    )


def _memory_tools(server: MCPServer, native: Native, caller_of: CallerOf, r: Refusals) -> None:
    memories = native.memories

    async def search_memories(
        query: Annotated[str, Field(description="what to look for, in any words")],
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=100, description="most results")] = 10,
        filter: Filter = None,
    ) -> shapes.FoundMemories:
        """Search the user's memories: the most relevant first, by terms (Chinese and
        English), meaning when the server has it on, and recency. Use it before
        answering anything about the user; with filter.as_of, what was true then."""
        caller = caller_of(ctx)
        request = mpb.SearchMemoriesRequest(
            user_id=caller.user_id, query=query, limit=limit, filter=args.memory_filter(filter)
        )
        found = await r.tool(memories.SearchMemories(request, metadata=caller.metadata()))
        return shapes.FoundMemories(
            memories=[shapes.scored_memory(s) for s in found.results], note=found.note
        )

    async def list_memories(
        ctx: Context,
        page_size: Annotated[int, Field(ge=1, le=200, description="most memories")] = 50,
        page_token: PageToken = "",
        filter: Filter = None,
    ) -> shapes.MemoryPage:
        """List the user's memories, newest first, a page at a time (the next pages
        need the same filter)."""
        caller = caller_of(ctx)
        request = mpb.ListMemoriesRequest(
            user_id=caller.user_id,
            page_size=page_size,
            page_token=page_token,
            filter=args.memory_filter(filter),
        )
        found = await r.tool(memories.ListMemories(request, metadata=caller.metadata()))
        return shapes.MemoryPage(
            memories=[shapes.memory(m) for m in found.memories],
            next_page_token=found.next_page_token,
        )

    async def add_memory(
        content: Annotated[str, Field(description="one fact or preference, in a sentence")],
        ctx: Context,
        scope: Annotated[
            args.ScopeArg | None, Field(description="the agent or app it belongs to")
        ] = None,
        metadata: args.Labels | None = None,
        valid_from: Annotated[args.When | None, Field(description="unset: now")] = None,
        valid_to: Annotated[args.When | None, Field(description="unset: still true")] = None,
        expire_time: Annotated[args.When | None, Field(description="unset: never")] = None,
    ) -> shapes.AddedMemory:
        """Remember a lasting fact about the user. The same text (ignoring case and
        spacing) is stored once per scope: adding it again returns the memory it has,
        unless valid_to is given (a fact that ended is a memory of its own)."""
        caller = caller_of(ctx)
        request = mpb.AddMemoryRequest(
            user_id=caller.user_id,
            content=content,
            scope=args.scope(scope),
            metadata=metadata or {},
            valid_from=args.timestamp(valid_from),
            valid_to=args.timestamp(valid_to),
            expire_time=args.timestamp(expire_time),
        )
        added = await r.tool(memories.AddMemory(request, metadata=caller.metadata()))
        return shapes.AddedMemory(memory=shapes.memory(added.memory), created=added.created)

    async def update_memory(
        memory_id: MemoryId,
        ctx: Context,
        content: Annotated[str | None, Field(description="the new text; unset: kept")] = None,
        supersede: Annotated[
            bool,
            Field(
                description="with content: the fact changed (the old text stays a fact of "
                "the past); false: a correction"
            ),
        ] = False,
        scope: Annotated[args.ScopeArg | None, Field(description="unset: kept")] = None,
        metadata: Annotated[
            args.Labels | None, Field(description="replaces all labels; unset: kept")
        ] = None,
        valid_from: Annotated[args.When | None, Field(description="unset: kept")] = None,
        valid_to: Annotated[
            args.When | None, Field(description="when it stopped being true; unset: kept")
        ] = None,
        expire_time: Annotated[args.When | None, Field(description="unset: kept")] = None,
    ) -> shapes.ChangedMemory:
        """Change a memory: its text (it keeps its id; the old text is kept in its
        history), scope, labels, validity or expiry. Give only what changes."""
        caller = caller_of(ctx)
        changed = mpb.Memory(
            content=content or "",
            scope=args.scope(scope),
            metadata=metadata or {},
            valid_from=args.timestamp(valid_from),
            valid_to=args.timestamp(valid_to),
            expire_time=args.timestamp(expire_time),
        )
        given = {
            "content": content,
            "scope": scope,
            "metadata": metadata,
            "valid_from": valid_from,
            "valid_to": valid_to,
            "expire_time": expire_time,
        }
        mask = [name for name, value in given.items() if value is not None]
        if not mask:
            raise ToolError(f"nothing to change: give one of {', '.join(given)}")
        request = mpb.UpdateMemoryRequest(
            user_id=caller.user_id,
            memory_id=memory_id,
            memory=changed,
            update_mask=FieldMask(paths=mask),
            supersede=supersede,
        )
        updated = await r.tool(memories.UpdateMemory(request, metadata=caller.metadata()))
        return shapes.ChangedMemory(memory=shapes.memory(updated.memory))

    async def delete_memory(memory_id: MemoryId, ctx: Context) -> shapes.DeletedMemory:
        """Forget one of the user's memories, when the user asks to or it is wrong."""
        caller = caller_of(ctx)
        request = mpb.DeleteMemoryRequest(user_id=caller.user_id, memory_id=memory_id)
        await r.tool(memories.DeleteMemory(request, metadata=caller.metadata()))
        return shapes.DeletedMemory(deleted=memory_id)

    _register(server, search_memories, "Search memories", read_only=True)
    _register(server, list_memories, "List memories", read_only=True)
    _register(server, add_memory, "Remember a fact", idempotent=True)
    _register(server, update_memory, "Change a memory", destructive=True)
    _register(server, delete_memory, "Forget a memory", destructive=True, idempotent=True)


def _session_tools(server: MCPServer, native: Native, caller_of: CallerOf, r: Refusals) -> None:
    sessions = native.sessions

    async def create_session(
        ctx: Context,
        title: str = "",
        scenario: Annotated[str, Field(description="whose prompt template applies")] = "",
        host: Annotated[str, Field(description="the host application, e.g. vscode")] = "",
    ) -> shapes.CreatedSession:
        """Start a new session of the user (its id is what build_context needs)."""
        caller = caller_of(ctx)
        request = spb.CreateSessionRequest(
            user_id=caller.user_id, title=title, scenario=scenario, host=host
        )
        created = await r.tool(sessions.CreateSession(request, metadata=caller.metadata()))
        return shapes.CreatedSession(session=shapes.session(created.session))

    async def list_sessions(
        ctx: Context,
        page_size: Annotated[int, Field(ge=1, le=200, description="most sessions")] = 20,
        page_token: PageToken = "",
    ) -> shapes.SessionPage:
        """The user's sessions, most recently active first."""
        caller = caller_of(ctx)
        request = spb.ListSessionsRequest(
            user_id=caller.user_id, page_size=page_size, page_token=page_token
        )
        found = await r.tool(sessions.ListSessions(request, metadata=caller.metadata()))
        return shapes.SessionPage(
            sessions=[shapes.session(s) for s in found.sessions],
            next_page_token=found.next_page_token,
        )

    async def read_session(
        session_id: SessionId,
        ctx: Context,
        page_size: Annotated[int, Field(ge=1, le=500, description="most messages")] = 100,
        page_token: PageToken = "",
    ) -> shapes.MessagePage:
        """A session's messages, oldest first."""
        caller = caller_of(ctx)
        request = spb.ListMessagesRequest(
            user_id=caller.user_id,
            session_id=session_id,
            page_size=page_size,
            page_token=page_token,
        )
        found = await r.tool(sessions.ListMessages(request, metadata=caller.metadata()))
        return shapes.MessagePage(
            messages=[shapes.session_message(m) for m in found.messages],
            next_page_token=found.next_page_token,
        )

    async def build_context(
        question: Annotated[str, Field(description="the user's message to answer")],
        session_id: SessionId,
        ctx: Context,
        token_budget: Annotated[int, Field(ge=1, description="most tokens of the list")] = 4000,
        output_format: Literal["neutral", "openai", "anthropic"] = "neutral",
    ) -> shapes.BuiltContext:
        """The messages a model should see to answer a question in a session: the system
        prompt with the user's relevant memories and recent sessions, the session's
        latest messages fitted to the budget, and the question; with the report of what
        was kept and dropped. Nothing is stored."""
        caller = caller_of(ctx)
        request = pb.BuildMessagesRequest(
            session=pb.SessionContext(user_id=caller.user_id, session_id=session_id),
            user_message=question,
            token_budget=token_budget,
            output_format=_FORMATS[output_format],
        )
        built = await r.tool(native.context.BuildMessages(request, metadata=caller.metadata()))
        return shapes.BuiltContext(
            messages=[shapes.message(m) for m in built.messages],
            report=shapes.as_json(built.report),
            payload=shapes.Payload(**json.loads(built.payload_json))
            if built.payload_json
            else None,
        )

    _register(server, create_session, "Start a session")
    _register(server, list_sessions, "List sessions", read_only=True)
    _register(server, read_session, "Read a session", read_only=True)
    _register(server, build_context, "Build the context for a question", read_only=True)

"""The native services as the MCP tools call them: every call carries the caller's
credential as ``authorization`` metadata and names the caller's user, so the native
server authenticates, scopes to the tenant, limits and audits it as any other call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc
import grpc.aio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from contextd.core.errors import cut
from contextd.fronts.caller import Caller
from contextd.v1 import (
    context_pb2,
    context_pb2_grpc,
    memory_pb2_grpc,
    sessions_pb2_grpc,
)

# Names the user with --auth none (and the user a service key acts for) on HTTP.
USER_HEADER = "X-Contextd-User"
# The same for `contextd mcp --stdio`, with the key in API_KEY_ENV.
USER_ENV = "CONTEXTD_USER"
API_KEY_ENV = "CONTEXTD_API_KEY"


# Who the call of a request acts for: from its HTTP headers, or the process's environment.
CallerOf = Callable[[Context], Caller]
T = TypeVar("T")
_LONGEST_ERROR = 300


class Refusals:
    """Native failures as the tools tell them: the status and message, bounded (a
    message may quote an id the caller sent, of any length); a refused user names
    where the transport takes it from (a header, a variable), not a native field."""

    def __init__(self, user_source: str) -> None:
        self._user_source = user_source

    def text(self, failure: grpc.aio.AioRpcError) -> str:
        details = failure.details() or ""
        if failure.code() == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("user_id"):
            details = self._user_source + details.removeprefix("user_id")
        return cut(f"{failure.code().name}: {details}", _LONGEST_ERROR)

    async def tool(self, call: Awaitable[T]) -> T:
        """The call's answer; a failed call becomes a tool error."""
        try:
            return await call
        except grpc.aio.AioRpcError as failure:
            raise ToolError(self.text(failure)) from None


# Channel options of the tools' calls: the native answers' metadata taken whole (an error
# message may be longer than grpc's 8 KiB default; the tools bound what they show).
CHANNEL_OPTIONS = [("grpc.max_metadata_size", 1024 * 1024)]


class Native:
    """Stubs of the native services on one channel."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel
        self.context = context_pb2_grpc.ContextServiceStub(channel)
        self.sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        self.memories = memory_pb2_grpc.MemoryServiceStub(channel)

    async def check(self, caller: Caller, deadline_s: float | None = None) -> None:
        """Raise the native status when ``caller``'s credential is refused: a call that
        needs a credential and reads nothing of anyone (ListTokenizers)."""
        await self.context.ListTokenizers(
            context_pb2.ListTokenizersRequest(), metadata=caller.metadata(), timeout=deadline_s
        )

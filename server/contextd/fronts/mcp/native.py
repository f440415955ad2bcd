"""The native services as the MCP tools call them: every call carries the caller's
credential as ``authorization`` metadata and names the caller's user, so the native
server authenticates, scopes to the tenant, limits and audits it as any other call."""

from __future__ import annotations

import grpc
import grpc.aio

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

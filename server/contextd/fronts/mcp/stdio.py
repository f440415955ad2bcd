"""``contextd mcp --stdio``: the MCP server over standard input and output, for desktop
apps that start their MCP servers as processes. It calls a running contextd at
``--address`` as the key in ``CONTEXTD_API_KEY`` (and, with ``--auth none`` or a
service key, as the user in ``CONTEXTD_USER``). Standard output carries the protocol
alone; logs go to standard error."""

from __future__ import annotations

import os
import sys

import grpc
import grpc.aio
from mcp.server.mcpserver import Context

from contextd.fronts.caller import Caller
from contextd.fronts.mcp.native import API_KEY_ENV, CHANNEL_OPTIONS, USER_ENV, Native
from contextd.fronts.mcp.tools import build_server

# How long the start waits for the server to accept the credential.
CHECK_TIMEOUT_S = 10.0


def caller_from_env(environ: dict[str, str] | None = None) -> Caller:
    env = os.environ if environ is None else environ
    key = env.get(API_KEY_ENV, "").strip()
    return Caller(f"Bearer {key}" if key else "", env.get(USER_ENV, "").strip())


async def serve(address: str, credentials: grpc.ChannelCredentials | None) -> int:
    """Check the credential, then serve until standard input closes; 1 when refused."""
    caller = caller_from_env()
    channel = (
        grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        if credentials is None
        else grpc.aio.secure_channel(address, credentials, options=CHANNEL_OPTIONS)
    )
    async with channel:
        native = Native(channel)
        try:
            await native.check(caller, deadline_s=CHECK_TIMEOUT_S)
        except grpc.aio.AioRpcError as error:
            hint = ""
            if error.code() == grpc.StatusCode.UNAUTHENTICATED:
                hint = f" (set {API_KEY_ENV} to a key of `contextd keys create`)"
            print(
                f"contextd mcp: {address}: {error.code().name}: {error.details()}{hint}",
                file=sys.stderr,
            )
            return 1

        def fixed_caller(_ctx: Context) -> Caller:
            return caller

        await build_server(native, fixed_caller, USER_ENV).run_stdio_async()
    return 0

"""The protocols other hosts already speak, served beside the native port: the
OpenAI-compatible HTTP API (mounted on the web port) and MCP (a port of its own).
Both translate to native calls, so auth, tenants, limits and the audit log apply as on
every port. Part of the composition root: the server starts them from here (their
settings are checked with the others, config.py)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

from contextd.config import Settings
from contextd.openai_http.routes import Model, OpenAIRoutes
from contextd.providers.registry import make_provider
from contextd.tls import ServerTls
from contextd.web.gateway import Mount

log = logging.getLogger("contextd.server")

# Stops a listener given the seconds left of the grace period.
Stop = Callable[[float], Awaitable[None]]


async def web_mounts(settings: Settings) -> list[Mount]:
    """What the web port serves besides gRPC-Web and Connect: the OpenAI-compatible API
    with --openai-api, listing the configured model. Its name is read from a provider
    built as the server builds its own (with its default when --provider-model is
    empty), then closed: nothing of the running server is reached into."""
    if not settings.openai_api:
        return []
    provider = make_provider(
        settings.provider, base_url=settings.provider_base_url, model=settings.provider_model
    )
    try:
        model = Model(provider.default_model, provider.name)
    finally:
        await provider.aclose()
    return [OpenAIRoutes([model])]


async def start_listeners(
    settings: Settings,
    target: str,
    tls: ServerTls | None,
    undo: contextlib.AsyncExitStack,
    share_port: bool = False,
) -> list[Stop]:
    """Start the MCP port when --mcp-port is set (its native calls go to ``target``);
    ``undo`` closes it if a later step of the start fails; ``share_port``: a worker's,
    whose port its siblings listen on too. Returns what stops it."""
    if settings.mcp_port < 0:
        return []
    # Imported here: the MCP SDK and uvicorn load only for a server that serves MCP.
    from contextd.mcp_server.http import PATH, McpListener

    host = settings.mcp_host or settings.host
    listener = McpListener(
        target,
        credential_required=settings.auth != "none",
        host=host,
        max_body=settings.max_message_bytes,
        max_connections=settings.web_max_connections,
        ssl_context=tls.ssl_context if tls is not None else None,
    )
    port = await listener.start(host, settings.mcp_port, reuse_port=share_port)
    undo.push_async_callback(listener.aclose)
    log.info(
        "mcp listening",
        extra={"address": f"{host}:{port}", "path": PATH, "tls": tls is not None},
    )
    return [listener.aclose]

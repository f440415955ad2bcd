"""Composition root: wires app/ into a grpc.aio server with health and reflection."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from grpc_health.v1 import _async as health_aio  # health.aio re-exports this module
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from contextd.api.context_servicer import ContextServicer
from contextd.api.interceptors import GuardInterceptor
from contextd.app.context import ContextApp
from contextd.config import Settings
from contextd.core.tokens import TokenizerRegistry
from contextd.v1 import context_pb2, context_pb2_grpc

log = logging.getLogger("contextd.server")

SERVICE_NAMES = (context_pb2.DESCRIPTOR.services_by_name["ContextService"].full_name,)


@dataclass
class RunningServer:
    server: grpc.aio.Server
    health: health_aio.HealthServicer
    port: int
    settings: Settings

    async def stop(self, grace: float | None = None) -> None:
        """Report NOT_SERVING, then let in-flight calls finish within the grace period."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(self.settings.shutdown_grace if grace is None else grace)


async def start(
    settings: Settings, extra_handlers: Sequence[grpc.GenericRpcHandler[Any, Any]] = ()
) -> RunningServer:
    tokenizers = TokenizerRegistry(settings.default_tokenizer)
    tokenizers.get(settings.default_tokenizer)  # fail at start-up, not on the first call
    app = ContextApp(tokenizers, settings.max_history_messages)
    server = grpc.aio.server(
        interceptors=[GuardInterceptor()],
        options=[
            ("grpc.max_receive_message_length", settings.max_message_bytes),
            ("grpc.max_send_message_length", settings.max_message_bytes),
        ],
        maximum_concurrent_rpcs=settings.max_concurrent_rpcs,
    )
    context_pb2_grpc.add_ContextServiceServicer_to_server(ContextServicer(app), server)
    health_servicer = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    if extra_handlers:
        server.add_generic_rpc_handlers(tuple(extra_handlers))
    port = server.add_insecure_port(f"{settings.host}:{settings.port}")
    if port == 0:
        raise SystemExit(f"cannot listen on {settings.host}:{settings.port}")
    await server.start()
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("listening", extra={"address": f"{settings.host}:{port}"})
    return RunningServer(server, health_servicer, port, settings)


async def serve(settings: Settings) -> None:
    """Run until SIGINT or SIGTERM, then shut down gracefully."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    running = await start(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down", extra={"grace_s": settings.shutdown_grace})
    await running.stop()
    log.info("stopped")

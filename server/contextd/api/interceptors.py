"""One interceptor for every RPC: checks the caller's credential, maps errors to status
codes and logs one line per call.

With an authenticator (``--auth`` other than none), every method except the open ones
(health, and reflection unless it is protected) needs a bearer credential; the check
runs here, before the servicer, so an RPC added later is covered without a line of its
own. The identity it proves goes to ``api.auth.current_identity`` for the servicer.
No exception leaves a handler as UNKNOWN: domain errors get their documented
code, anything else becomes INTERNAL with an id that points into the server log.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any, cast

import grpc
import grpc.aio

from contextd.api.auth import Authenticator, bearer_token, current_identity
from contextd.api.errors import status_for
from contextd.api.types import Context, Handler
from contextd.core.errors import ContextdError, Unauthenticated
from contextd.core.identity import Identity

log = logging.getLogger("contextd.rpc")

Unary = Callable[[Any, Context], Awaitable[Any]]
Streaming = Callable[[Any, Context], AsyncGenerator[Any, None] | Awaitable[None]]


class _Call:
    """Timing and outcome of one RPC, logged when it ends."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.code = grpc.StatusCode.OK
        self.started = time.perf_counter()
        self.identity: Identity | None = None

    async def authenticate(self, authenticator: Authenticator, context: Context) -> None:
        """Prove the caller's identity from the call's bearer token (raises Unauthenticated)."""
        token = bearer_token(context.invocation_metadata())
        if token is None:
            raise Unauthenticated()
        self.identity = await authenticator.authenticate(token)
        current_identity.set(self.identity)

    async def fail(self, error: BaseException, context: Context) -> None:
        """Record the outcome of ``error`` and abort the call accordingly (always raises)."""
        if isinstance(error, asyncio.CancelledError | GeneratorExit):
            # The client went away (GeneratorExit: closed while blocked on a write).
            self.code = grpc.StatusCode.CANCELLED
            raise error
        if isinstance(error, grpc.aio.AbortError):
            self.code = context.code() or grpc.StatusCode.UNKNOWN
            raise error
        if isinstance(error, ContextdError):
            status = status_for(error)
            self.code = status.code
            await context.abort(status.code, status.details, status.trailing_metadata)
        incident = uuid.uuid4().hex[:12]
        log.exception("unhandled error in %s (incident %s)", self.method, incident)
        self.code = grpc.StatusCode.INTERNAL
        await context.abort(grpc.StatusCode.INTERNAL, f"internal error (incident {incident})")

    def log(self) -> None:
        extra: dict[str, object] = {
            "method": self.method,
            "code": self.code.name,
            "ms": round((time.perf_counter() - self.started) * 1000, 3),
        }
        if self.identity is not None:
            extra["credential"] = self.identity.credential_id
            extra["user"] = self.identity.user_id
        log.info("rpc", extra=extra)


def _guard_unary(method: str, behavior: Unary, authenticator: Authenticator | None) -> Unary:
    async def handler(request: Any, context: Context) -> Any:
        call = _Call(method)
        try:
            if authenticator is not None:
                await call.authenticate(authenticator, context)
            return await behavior(request, context)
        except BaseException as error:
            await call.fail(error, context)
        finally:
            call.log()

    return handler


def _guard_stream(
    method: str, behavior: Streaming, authenticator: Authenticator | None
) -> Streaming:
    async def handler(request: Any, context: Context) -> AsyncGenerator[Any, None]:
        call = _Call(method)
        try:
            if authenticator is not None:
                await call.authenticate(authenticator, context)
            produced = behavior(request, context)
            if inspect.isawaitable(produced):
                # A handler that streams with context.write() (grpc's health Watch does).
                await produced
            else:
                # aclosing: when the client goes away the handler's generator closes now,
                # not whenever it is garbage-collected (it may hold a provider stream).
                async with contextlib.aclosing(produced) as items:
                    async for item in items:
                        yield item
        except BaseException as error:
            await call.fail(error, context)
        finally:
            call.log()

    return handler


class GuardInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    def __init__(
        self, authenticator: Authenticator | None = None, open_services: Sequence[str] = ()
    ) -> None:
        """``open_services``: full service names whose methods need no credential."""
        self._authenticator = authenticator
        self._open_prefixes = tuple(f"/{name}/" for name in open_services)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        authenticator = None if method.startswith(self._open_prefixes) else self._authenticator
        # grpc's handlers are namedtuples; the stubs type them for the sync API.
        raw: Any = handler
        if raw.unary_unary is not None:
            unary = _guard_unary(method, raw.unary_unary, authenticator)
            return cast(Handler, raw._replace(unary_unary=unary))
        if raw.unary_stream is not None:
            streaming = _guard_stream(method, raw.unary_stream, authenticator)
            return cast(Handler, raw._replace(unary_stream=streaming))
        if raw.stream_stream is not None:
            streaming = _guard_stream(method, raw.stream_stream, authenticator)
            return cast(Handler, raw._replace(stream_stream=streaming))
        if raw.stream_unary is not None:
            unary = _guard_unary(method, raw.stream_unary, authenticator)
            return cast(Handler, raw._replace(stream_unary=unary))
        return handler

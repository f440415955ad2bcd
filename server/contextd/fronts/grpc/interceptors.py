"""One interceptor for every RPC: checks the caller's credential and limits, maps errors
to status codes, logs one line per call and an audit line per call on user data, and
counts and times the call for the metrics port when it is on, and traces it as a server
span when tracing is on (here rather than in interceptors of their own, which would each
add a generator layer to every streamed message).

With an authenticator (``--auth`` other than none), every method except the open ones
(health, and reflection unless it is protected) needs a bearer credential; the check
runs here, before the servicer, so an RPC added later is covered without a line of its
own. The identity it proves goes to ``api.auth.current_identity`` for the servicer.
Limits (``--rate-limit``, ``--max-concurrent-turns``) are checked next, also before the
servicer, so a refused call does no work. No exception leaves a handler as UNKNOWN:
domain errors get their documented code, anything else becomes INTERNAL with an id that
points into the server log.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import inspect
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import grpc
import grpc.aio

from contextd.core.errors import ContextdError, Unauthenticated, cut
from contextd.core.identity import Identity
from contextd.fronts.grpc.audit import AuditPlan, plan_for
from contextd.fronts.grpc.auth import Authenticator, bearer_token, caller_for, current_identity
from contextd.fronts.grpc.errors import status_for
from contextd.fronts.grpc.limits import RateLimiter, TurnSlots
from contextd.fronts.grpc.request_parsing import RequestParser, checked, deferring, is_unparsed
from contextd.fronts.grpc.types import Context, Handler
from contextd.metrics.prometheus import GrpcMetrics, RpcMeter
from contextd.tracing import rpc_span

log = logging.getLogger("contextd.rpc")

Unary = Callable[[Any, Context], Awaitable[Any]]
Streaming = Callable[[Any, Context], AsyncGenerator[Any, None] | Awaitable[None]]

# Metadata the web port adds to each call it forwards: "<secret> <browser's address>".
# Only a value with the server's secret is believed, so a native caller cannot pose as
# another address.
WEB_PEER_KEY = "contextd-web-peer"


@dataclass(frozen=True, slots=True)
class Limits:
    """The per-caller limits; None for a limit that is off."""

    rate: RateLimiter | None = None
    turns: TurnSlots | None = None
    # Methods whose calls are chat turns, counted by ``turns``.
    turn_methods: frozenset[str] = frozenset()
    # Services never limited (health).
    exempt_services: tuple[str, ...] = ()
    # The secret of WEB_PEER_KEY values; empty when no web port forwards calls.
    web_peer_secret: str = ""


@dataclass(frozen=True, slots=True)
class _Method:
    """What the interceptor does for one method, worked out once per method name."""

    name: str
    authenticator: Authenticator | None
    audit: AuditPlan | None
    rate: RateLimiter | None
    turns: TurnSlots | None
    web_peer_secret: str
    meter: RpcMeter | None  # None without a metrics port
    trace: rpc_span.RpcTrace


class _Call:
    """Admission, timing and outcome of one RPC, logged when it ends."""

    def __init__(self, method: _Method, request: Any, context: Context) -> None:
        self.method = method
        # The caller's trace is current from here to the call's end (its log lines
        # included), with the call's span in it when tracing is on.
        self.span = method.trace.begin(context.invocation_metadata())
        self.request = request
        self.code = grpc.StatusCode.OK
        self.started = time.perf_counter()
        self.identity: Identity | None = None
        # The user the request names ("" for the caller); None: not a call on user data.
        self.user: str | None = None
        self.response: Any = None
        self.turn: Hashable | None = None
        if method.meter is not None:
            method.meter.started.inc()

    async def admit(self, context: Context) -> None:
        """Authenticate, then apply the limits; raises when the call may not run."""
        method = self.method
        if method.audit is not None:
            self.user = method.audit.user_named(self.request)
        if method.authenticator is not None:
            await self.authenticate(method.authenticator, context)
        if method.rate is not None:
            method.rate.take(self._rate_key(context))
        if method.turns is not None and self.user is not None:
            self._take_turn(method.turns)

    async def authenticate(self, authenticator: Authenticator, context: Context) -> None:
        """Prove the caller's identity from the call's bearer token (raises Unauthenticated)."""
        token = bearer_token(context.invocation_metadata())
        if token is None:
            raise Unauthenticated()
        self.identity = await authenticator.authenticate(token)
        current_identity.set(self.identity)

    def _take_turn(self, turns: TurnSlots) -> None:
        """Count the call as a turn of the user it acts as, by the same rule as the
        servicer, so nobody can take another user's slots by naming them."""
        assert self.method.audit is not None and self.user is not None
        try:
            caller = caller_for(self.user, ".".join(self.method.audit.user_path))
        except ContextdError:
            return  # the servicer refuses the request as it is, with every reason
        turns.acquire((caller.tenant_id, caller.user_id))
        self.turn = (caller.tenant_id, caller.user_id)

    def _rate_key(self, context: Context) -> Hashable:
        """Whose requests a call counts as: its credential's; without one (``--auth
        none``, an open method) the user the request names, else the address it came
        from."""
        if self.identity is not None:
            return ("credential", self.identity.tenant_id, self.identity.credential_id)
        if self.user:
            return ("user", self.user)
        return ("peer", _peer_address(context, self.method.web_peer_secret))

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
        log.exception("unhandled error in %s (incident %s)", self.method.name, incident)
        self.code = grpc.StatusCode.INTERNAL
        await context.abort(grpc.StatusCode.INTERNAL, f"internal error (incident {incident})")

    def end(self) -> None:
        """Free the call's turn slot and write its log lines."""
        method = self.method
        if self.turn is not None and method.turns is not None:
            method.turns.release(self.turn)
        seconds = time.perf_counter() - self.started
        if method.meter is not None:
            method.meter.handling.observe(seconds)
            method.meter.handled(self.code.name).inc()
        extra: dict[str, object] = {
            "method": method.name,
            "code": self.code.name,
            "ms": round(seconds * 1000, 3),
        }
        if self.identity is not None:
            extra["credential"] = cut(self.identity.credential_id)
            extra["user"] = cut(self.identity.user_id)
        log.info("rpc", extra=extra)
        if self.span is not None:
            rpc_span.end(self.span, self.code)
        if self.user is not None and method.audit is not None:
            method.audit.write(
                method.name, self.user, self.identity, self.code, self.request, self.response
            )


def _peer_address(context: Context, web_peer_secret: str) -> str:
    """The caller's address without its port (a new connection is the same caller); for
    a call the web port forwarded, the browser's address the web port vouches for."""
    if web_peer_secret:
        for key, value in context.invocation_metadata() or ():
            if key == WEB_PEER_KEY and isinstance(value, str):
                secret, _, address = value.partition(" ")
                if hmac.compare_digest(secret.encode(), web_peer_secret.encode()):
                    return "web:" + address
    peer = context.peer() or ""
    if peer.startswith(("ipv4:", "ipv6:")):
        return peer.rsplit(":", 1)[0]
    return peer


def _guard_unary(method: _Method, behavior: Unary, parser: RequestParser) -> Unary:
    async def handler(request: Any, context: Context) -> Any:
        call = _Call(method, request, context)
        try:
            if not is_unparsed(request):  # the common case: no context manager to enter
                call.request = checked(request)
                return await _answer(call, behavior, context)
            async with parser.whole_call(request) as call.request:
                return await _answer(call, behavior, context)
        except BaseException as error:
            await call.fail(error, context)
        finally:
            call.end()

    return handler


async def _answer(call: _Call, behavior: Unary, context: Context) -> Any:
    await call.admit(context)
    call.response = await behavior(call.request, context)
    return call.response


def _guard_stream(method: _Method, behavior: Streaming, parser: RequestParser) -> Streaming:
    async def handler(request: Any, context: Context) -> AsyncGenerator[Any, None]:
        call = _Call(method, request, context)
        try:
            request = call.request = await parser.ready(request)
            await call.admit(context)
            produced = behavior(request, context)
            if inspect.isawaitable(produced):
                # A handler that streams with context.write() (grpc's health Watch does).
                await produced
            else:
                # aclosing: when the client goes away the handler's generator closes now,
                # not whenever it is garbage-collected (it may hold a provider stream).
                async with contextlib.aclosing(produced) as items:
                    async for item in items:
                        if call.response is None:  # the audit reads the first one's ids
                            call.response = item
                        yield item
        except BaseException as error:
            await call.fail(error, context)
        finally:
            call.end()

    return handler


class GuardInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    def __init__(
        self,
        authenticator: Authenticator | None = None,
        open_services: Sequence[str] = (),
        limits: Limits | None = None,
        metrics: GrpcMetrics | None = None,
    ) -> None:
        """``open_services``: full service names whose methods need no credential;
        ``metrics``: where every call is counted and timed (None: nowhere)."""
        self._metrics = metrics
        self._authenticator = authenticator
        self._open_prefixes = tuple(f"/{name}/" for name in open_services)
        self._limits = limits or Limits()
        self._exempt_prefixes = tuple(f"/{name}/" for name in self._limits.exempt_services)
        self._methods: dict[str, _Method] = {}
        self._parser = RequestParser()

    def _method(self, name: str, grpc_type: str) -> _Method:
        found = self._methods.get(name)
        if found is None:
            limits = self._limits
            exempt = name.startswith(self._exempt_prefixes)
            found = self._methods[name] = _Method(
                name,
                None if name.startswith(self._open_prefixes) else self._authenticator,
                plan_for(name),
                None if exempt else limits.rate,
                limits.turns if name in limits.turn_methods else None,
                limits.web_peer_secret,
                None if self._metrics is None else self._metrics.meter(name, grpc_type),
                rpc_span.RpcTrace(name),
            )
        return found

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        return self.guarded(handler_call_details.method, handler)

    def guarded(self, name: str, handler: Handler) -> Handler:
        """``handler`` of the method ``name`` behind the guard: the native port's calls,
        and those made in the server's own process (in_process.py)."""
        # grpc's handlers are namedtuples; the stubs type them for the sync API.
        raw: Any = handler
        parser = self._parser
        if raw.unary_unary is not None:
            unary = _guard_unary(self._method(name, "unary"), raw.unary_unary, parser)
            return cast(Handler, _deferring(raw)._replace(unary_unary=unary))
        if raw.unary_stream is not None:
            method = self._method(name, "server_stream")
            streaming = _guard_stream(method, raw.unary_stream, parser)
            return cast(Handler, _deferring(raw)._replace(unary_stream=streaming))
        # Streamed requests (reflection) arrive message by message, each parsed by grpc.
        if raw.stream_stream is not None:
            method = self._method(name, "bidi_stream")
            streaming = _guard_stream(method, raw.stream_stream, parser)
            return cast(Handler, raw._replace(stream_stream=streaming))
        if raw.stream_unary is not None:
            unary = _guard_unary(self._method(name, "client_stream"), raw.stream_unary, parser)
            return cast(Handler, raw._replace(stream_unary=unary))
        return handler


def _deferring(raw: Any) -> Any:
    """The handler with its request deserializer wrapped by ``request_parsing.deferring``."""
    if raw.request_deserializer is None:
        return raw
    return raw._replace(request_deserializer=deferring(raw.request_deserializer))

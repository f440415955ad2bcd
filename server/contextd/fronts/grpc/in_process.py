"""The native methods called from the server's own process (fronts/native.py says what
for): each call runs the servicer's handler behind the native port's own guard
(``GuardInterceptor.guarded``), in a task of its own as grpc runs it, with the metadata
a channel would send; its messages are handed over as they are made, unserialised.

What the native server does around a handler is done here too: a request over
``--max-message-bytes`` is refused (RESOURCE_EXHAUSTED, at the first read, as a
channel reports it); once the server stops, new calls are refused (UNAVAILABLE) and
those still running when its grace period ends are cancelled (their callers read
CANCELLED). A status the guard
aborts with comes back as the ``grpc.aio.AioRpcError`` a channel would raise, its
details and trailing metadata (``grpc-status-details-bin``) whole.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from typing import Any, NoReturn, cast

import grpc
import grpc.aio
from google.protobuf.message import Message

from contextd.fronts.grpc.interceptors import GuardInterceptor
from contextd.fronts.grpc.types import Context, Handler

# What registers a service's handlers on a server (``add_*Servicer_to_server``).
Registration = Callable[[Any], None]
_END = object()  # a call's end, after its last message


class _Aborted(grpc.aio.AbortError):
    """A status a call was aborted with, raised out of its handler."""

    def __init__(self, code: grpc.StatusCode, details: str, trailing: Sequence[Any]) -> None:
        super().__init__(details)
        self.status = grpc.aio.AioRpcError(
            code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailing), details, ""
        )


class LocalContext:
    """The part of a grpc ServicerContext the guard and the servicers use."""

    __slots__ = ("_code", "_metadata", "_peer")

    def __init__(self, metadata: tuple[tuple[str, str], ...], peer: str) -> None:
        self._metadata = metadata
        self._peer = peer
        self._code: grpc.StatusCode | None = None

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        return None  # no deadline: the caller cancels the call when its client goes

    def code(self) -> grpc.StatusCode | None:
        return self._code

    async def abort(
        self, code: grpc.StatusCode, details: str = "", trailing_metadata: Sequence[Any] = ()
    ) -> NoReturn:
        self._code = code
        raise _Aborted(code, details, trailing_metadata)


def _failed(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details, "")


class LocalStream:
    """A server-streaming call made in process (fronts.native.NativeStream). Its handler
    runs in a task of its own, as on the native server: cancelled on its own when the
    call ends early, and a caller that stops reading leaves it running to its end."""

    __slots__ = ("_calls", "_ended", "_messages", "_refused", "task")

    def __init__(
        self,
        calls: InProcess,
        items: AsyncGenerator[Any, None] | None,
        refused: grpc.aio.AioRpcError | None,
    ) -> None:
        self._calls = calls
        self._refused = refused
        # The handler's messages, then its end: _END or the status it failed with.
        self._messages: asyncio.Queue[Any] = asyncio.Queue()
        self._ended = False
        self.task = None if items is None else asyncio.create_task(self._run(items))

    async def _run(self, items: AsyncGenerator[Any, None]) -> None:
        put = self._messages.put_nowait
        try:
            # aclosing: a handler stopped at a message when the call ends closes now.
            async with contextlib.aclosing(items):
                async for message in items:
                    put(message)
                    # The caller takes it before the handler goes on, as grpc sends a
                    # message before asking for the next: it is written as it is made.
                    await asyncio.sleep(0)
            put(_END)
        except _Aborted as aborted:
            put(aborted.status)
        except asyncio.CancelledError:
            put(_failed(grpc.StatusCode.CANCELLED, "the call was cancelled"))
            raise
        except Exception as error:  # the guard lets nothing else out: a bug, for the caller
            put(error)
        finally:
            self._calls.ended(self)

    async def read(self) -> Message | None:
        if self._refused is not None:
            raise self._refused
        if self._ended:
            return None
        message = await self._messages.get()
        if message is _END:
            self._ended = True
            return None
        if isinstance(message, BaseException):
            self._ended = True
            raise message
        return cast(Message, message)

    async def aclose(self) -> None:
        """Cancel the handler if it still runs (the turn keeps its partial answer), and
        wait for its end."""
        if self.task is None or self.task.done():
            return
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


class _Handlers:
    """What ``add_*Servicer_to_server`` registers, kept by method path."""

    def __init__(self) -> None:
        self.by_method: dict[str, Handler] = {}

    def add_generic_rpc_handlers(self, handlers: Iterable[object]) -> None:
        """Ignored: the same handlers come by name to the method below."""

    def add_registered_method_handlers(self, service: str, handlers: Mapping[str, Handler]) -> None:
        for name, handler in handlers.items():
            self.by_method[f"/{service}/{name}"] = handler


class InProcess:
    """The native methods of ``registrations``, each behind ``guard`` (fronts.native's
    InProcess)."""

    def __init__(
        self,
        guard: GuardInterceptor,
        registrations: Iterable[Registration],
        max_message_bytes: int,
    ) -> None:
        found = _Handlers()
        for register in registrations:
            register(found)
        self._handlers = {
            name: guard.guarded(name, handler) for name, handler in found.by_method.items()
        }
        self._max_message_bytes = max_message_bytes
        self._running: set[LocalStream] = set()
        self._stopping = False
        self._idle = asyncio.Event()
        self._idle.set()

    def stream(
        self, method: str, request: Message, metadata: Sequence[tuple[str, str]], peer: str
    ) -> LocalStream:
        handler: Any = self._handlers.get(method)
        if handler is None or handler.unary_stream is None:
            raise ValueError(f"{method} is not a server-streaming method here")
        refused = self._refusal(request)
        if refused is not None:
            return LocalStream(self, None, refused)
        context = LocalContext(tuple(metadata), peer)
        self._idle.clear()
        call = LocalStream(self, handler.unary_stream(request, cast(Context, context)), None)
        self._running.add(call)
        return call

    def _refusal(self, request: Message) -> grpc.aio.AioRpcError | None:
        """The status the native server would refuse ``request`` with before its handler."""
        if self._stopping:
            return _failed(grpc.StatusCode.UNAVAILABLE, "the server is shutting down")
        size = request.ByteSize()
        if size > self._max_message_bytes:
            return _failed(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"Received message larger than max ({size} vs. {self._max_message_bytes})",
            )
        return None

    def ended(self, call: LocalStream) -> None:
        self._running.discard(call)
        if not self._running:
            self._idle.set()

    async def stop(self, grace: float) -> None:
        """As the native server stops: refuse new calls, give those running ``grace``
        seconds, then cancel them (a turn keeps its partial answer, as on a client's
        cancel; its caller reads CANCELLED)."""
        self._stopping = True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self._idle.wait()
        for call in list(self._running):
            if call.task is not None:
                call.task.cancel()

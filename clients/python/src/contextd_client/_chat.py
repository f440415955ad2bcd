"""A chat turn's event stream over a StreamChat call, sync and asyncio."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Coroutine, Iterator
from types import TracebackType
from typing import Any, cast

import grpc
import grpc.aio

from . import _chat_calls as chat_calls
from ._errors import CancelledError, ContextdError, InvalidResponseError, StatusCode
from ._types import ChatEvent, TextDelta, TurnCompleted, TurnStarted

# What UnaryStreamCall.read() returns at the end of the stream (not in grpc's stubs).
_EOF: object = grpc.aio.EOF  # type: ignore[attr-defined]


class _TurnState:
    """What the events of a turn said so far (shared by both stream classes)."""

    def __init__(self) -> None:
        #: The turn's TurnStarted event, once it arrived.
        self.started: TurnStarted | None = None
        #: The turn's TurnCompleted event, once it arrived.
        self.completed: TurnCompleted | None = None
        self._text: list[str] = []
        self._done = False
        self._cancelled = False

    @property
    def session_id(self) -> str:
        """The turn's session (a new one's too), "" until TurnStarted arrived."""
        return self.started.session_id if self.started is not None else ""

    @property
    def text(self) -> str:
        """The text deltas received so far, joined."""
        return "".join(self._text)

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` stopped the stream before it ended."""
        return self._cancelled

    def _record(self, event: ChatEvent) -> None:
        if isinstance(event, TurnStarted):
            self.started = event
        elif isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, TurnCompleted):
            self.completed = event

    def _result(self) -> TurnCompleted:
        if self.completed is not None:
            return self.completed
        if self._cancelled:
            raise CancelledError(StatusCode.CANCELLED, "the turn was cancelled by the client")
        raise InvalidResponseError("StreamChat ended without a TurnCompleted event")


class ChatStream(_TurnState, Iterator[ChatEvent]):
    """The events of one chat turn, as they arrive: an iterator over a StreamChat call.

    Iterate it (``for event in stream``), or call :meth:`result` for the TurnCompleted
    event. Stopping early cancels the call: :meth:`cancel` (or :meth:`close`), leaving
    a ``with`` block, an exception such as KeyboardInterrupt raised while waiting for an
    event, or the stream being garbage collected (as when a ``for`` loop over
    ``client.stream_chat(...)`` is left with ``break``). After a cancel the iteration
    simply ends. Errors of the call raise :class:`ContextdError`.
    """

    def __init__(self, call: Any) -> None:
        super().__init__()
        self._call = call

    @property
    def call(self) -> Any:
        """The underlying ``grpc`` call (a ``grpc.Call`` that is also an iterator)."""
        return self._call

    def __iter__(self) -> ChatStream:
        return self

    def __next__(self) -> ChatEvent:
        while not self._done:
            try:
                response = next(self._call)
            except StopIteration:
                self._done = True
                raise
            except grpc.RpcError as error:
                self._done = True
                if self._cancelled:
                    raise StopIteration from None
                raise ContextdError.from_rpc_error(error) from error
            except BaseException:
                # KeyboardInterrupt (or SystemExit) while waiting: nobody reads on.
                self.cancel()
                raise
            event = chat_calls.chat_event(response)
            if event is not None:  # None: an event kind of a newer server
                self._record(event)
                return event
        raise StopIteration

    def result(self) -> TurnCompleted:
        """Read the rest of the turn and return its TurnCompleted event.

        Raises ContextdError (CANCELLED) if the stream was cancelled before it.
        """
        for _ in self:
            pass
        return self._result()

    def cancel(self) -> bool:
        """Cancel the call if it is still running; True if this cancelled it."""
        if self._done:
            return False
        self._done = self._cancelled = True
        return bool(self._call.cancel())

    def close(self) -> None:
        """Same as :meth:`cancel`, for ``contextlib.closing``."""
        self.cancel()

    def __enter__(self) -> ChatStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cancel()

    def __del__(self) -> None:
        # At interpreter shutdown there may be nothing left to cancel.
        with contextlib.suppress(Exception):
            self.cancel()


class _StartingCall:
    """Stands in for a StreamChat call whose token a provider still has to give.

    The first read awaits the start (token, then call) and puts the real call in the
    stream's place, so every later read goes to the call directly.
    """

    def __init__(
        self,
        stream: AsyncChatStream,
        start: Coroutine[Any, Any, grpc.aio.UnaryStreamCall[Any, Any]],
    ) -> None:
        self._stream = stream
        self._start = start
        self._cancelled = False

    async def read(self) -> object:
        call = await self._start
        self._stream._call = call
        if self._cancelled:  # cancelled from another task while the token was awaited
            call.cancel()
        return await call.read()

    def cancel(self) -> bool:
        """No call to cancel yet: a start not begun never runs, one under way is
        cancelled as soon as its call exists."""
        self._cancelled = True
        if inspect.getcoroutinestate(self._start) == inspect.CORO_CREATED:
            self._start.close()
        return False


class AsyncChatStream(_TurnState, AsyncIterator[ChatEvent]):
    """The events of one chat turn for asyncio: an async iterator over a StreamChat call.

    ``async for event in stream``, or ``await stream.result()``. Stopping early cancels
    the call: :meth:`cancel` (or ``await`` :meth:`aclose`), leaving an ``async with``
    block, cancelling the task that waits for an event, or the stream being garbage
    collected (as when an ``async for`` loop over ``client.stream_chat(...)`` is left
    with ``break``). After a cancel the iteration simply ends. Errors of the call raise
    :class:`ContextdError`.
    """

    def __init__(
        self,
        call: grpc.aio.UnaryStreamCall[Any, Any] | None = None,
        *,
        start: Coroutine[Any, Any, grpc.aio.UnaryStreamCall[Any, Any]] | None = None,
    ) -> None:
        """Over ``call``, or over the call ``start`` makes once the first event is read."""
        super().__init__()
        self._call: grpc.aio.UnaryStreamCall[Any, Any] | _StartingCall
        if call is not None and start is None:
            self._call = call
        elif start is not None and call is None:
            self._call = _StartingCall(self, start)
        else:
            raise ValueError("give either call or start")

    @property
    def call(self) -> grpc.aio.UnaryStreamCall[Any, Any]:
        """The underlying ``grpc.aio`` call (with a token provider, it exists once the
        first event was read: RuntimeError before)."""
        if isinstance(self._call, _StartingCall):
            raise RuntimeError("the call starts when the first event is read")
        return self._call

    def __aiter__(self) -> AsyncChatStream:
        return self

    async def __anext__(self) -> ChatEvent:
        while not self._done:
            try:
                response = await self._call.read()
            except grpc.RpcError as error:
                self._done = True
                if self._cancelled:
                    raise StopAsyncIteration from None
                raise ContextdError.from_rpc_error(error) from error
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if self._cancelled and (task is None or not task.cancelling()):
                    # Our own cancel() from another task: the stream just ends.
                    raise StopAsyncIteration from None
                self.cancel()
                raise
            except BaseException:
                self.cancel()
                raise
            if response is _EOF:
                self._done = True
                break
            event = chat_calls.chat_event(cast(Any, response))
            if event is not None:  # None: an event kind of a newer server
                self._record(event)
                return event
        raise StopAsyncIteration

    async def result(self) -> TurnCompleted:
        """Read the rest of the turn and return its TurnCompleted event.

        Raises ContextdError (CANCELLED) if the stream was cancelled before it.
        """
        async for _ in self:
            pass
        return self._result()

    def cancel(self) -> bool:
        """Cancel the call if it is still running; True if this cancelled it."""
        if self._done:
            return False
        self._done = self._cancelled = True
        return self._call.cancel()

    async def aclose(self) -> None:
        """Same as :meth:`cancel`, for ``contextlib.aclosing``."""
        self.cancel()

    async def __aenter__(self) -> AsyncChatStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cancel()

    def __del__(self) -> None:
        # The event loop may be gone already: then there is nothing left to cancel.
        with contextlib.suppress(Exception):
            self.cancel()

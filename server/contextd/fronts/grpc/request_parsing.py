"""Request messages read without stalling the server or failing as UNKNOWN.

grpc parses a request with the method's deserializer before any handler runs, on the
event loop's thread. Two things go wrong there without help: bytes that are not a valid
message make grpc end the call as UNKNOWN, with a traceback and without the call's log
line; and a request of many megabytes holds the loop for tens of milliseconds while it
is parsed. The deserializer is therefore wrapped: a request that does not parse is kept
as the reason it did not, and one over ``LARGE_REQUEST_BYTES`` is kept unparsed. The
guard then turns the first into INVALID_ARGUMENT and parses the second on a worker
thread. Large unary calls then run one at a time, parse and handler together: what such
a call does while holding the GIL (making Python strings of its megabytes of text) comes
in steps of tens of milliseconds, and one call's steps at a time leave the loop's thread
its turns in between, so that small calls and health checks keep answering.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from contextd.core.errors import InvalidArgument

# About a millisecond of parsing: below it the loop parses as it always did.
LARGE_REQUEST_BYTES = 1024 * 1024

Parse = Callable[[bytes], Any]


class _Unparsed:
    __slots__ = ("data", "parse")

    def __init__(self, data: bytes, parse: Parse) -> None:
        self.data = data
        self.parse = parse


class _Undecodable:
    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what


def deferring(parse: Parse) -> Parse:
    """``parse`` for grpc, leaving large and invalid requests to ``RequestParser.ready``."""

    def deserialize(data: bytes) -> Any:
        if len(data) > LARGE_REQUEST_BYTES:
            return _Unparsed(data, parse)
        try:
            return parse(data)
        except Exception:  # protobuf's DecodeError, or anything a parser raises
            return _Undecodable(_message_name(parse))

    return deserialize


class RequestParser:
    def __init__(self) -> None:
        self._slot = asyncio.Semaphore(1)  # held by the large call in progress

    async def ready(self, request: Any) -> Any:
        """The request message (a large one parsed in its turn); INVALID_ARGUMENT for
        bytes that are not one."""
        if isinstance(request, _Unparsed):
            async with self._slot:
                request = await asyncio.to_thread(_parse_or_keep_reason, request)
        return checked(request)

    @contextlib.asynccontextmanager
    async def whole_call(self, request: Any) -> AsyncIterator[Any]:
        """As ``ready``, a large request keeping its turn until the block ends."""
        if not isinstance(request, _Unparsed):
            yield checked(request)
            return
        async with self._slot:
            yield checked(await asyncio.to_thread(_parse_or_keep_reason, request))


def is_unparsed(request: Any) -> bool:
    """Whether ``request`` is a large one still to parse (``RequestParser.whole_call``)."""
    return type(request) is _Unparsed


def checked(request: Any) -> Any:
    """``request``, or INVALID_ARGUMENT when it did not parse."""
    if isinstance(request, _Undecodable):
        raise InvalidArgument.one(
            "request", f"not a valid {request.what} message (protobuf wire format)"
        )
    return request


def _parse_or_keep_reason(request: _Unparsed) -> Any:
    try:
        return request.parse(request.data)
    except Exception:
        return _Undecodable(_message_name(request.parse))


def _message_name(parse: Parse) -> str:
    """The full name of the message type ``parse`` reads (``Message.FromString``)."""
    owner = getattr(parse, "__self__", None)
    descriptor = getattr(owner, "DESCRIPTOR", None)
    return str(getattr(descriptor, "full_name", "request"))

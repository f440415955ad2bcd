"""Lazy reading of a paged list call: the next page is asked for when the last is used up."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any, TypeVar

_Item = TypeVar("_Item")

#: The request for the page after ``page_token`` ("" for the first page).
RequestFor = Callable[[str], Any]
#: The converted items of one response.
ItemsOf = Callable[[Any], Iterable[_Item]]


def pages(
    call: Callable[[Any], Any], request_for: RequestFor, items_of: ItemsOf[_Item]
) -> Iterator[_Item]:
    """The items of every page, read one page at a time through ``call(request)``."""
    # Built now, so that a bad argument raises at the call, not at the first next().
    first = request_for("")
    return _read(call, first, request_for, items_of)


def _read(
    call: Callable[[Any], Any], request: Any, request_for: RequestFor, items_of: ItemsOf[_Item]
) -> Iterator[_Item]:
    while True:
        response = call(request)
        yield from items_of(response)
        if not response.next_page_token:
            return
        request = request_for(response.next_page_token)


def async_pages(
    call: Callable[[Any], Awaitable[Any]], request_for: RequestFor, items_of: ItemsOf[_Item]
) -> AsyncIterator[_Item]:
    """:func:`pages` for the asyncio client: ``async for`` reads the pages as needed."""
    first = request_for("")
    return _async_read(call, first, request_for, items_of)


async def _async_read(
    call: Callable[[Any], Awaitable[Any]],
    request: Any,
    request_for: RequestFor,
    items_of: ItemsOf[_Item],
) -> AsyncIterator[_Item]:
    while True:
        response = await call(request)
        for item in items_of(response):
            yield item
        if not response.next_page_token:
            return
        request = request_for(response.next_page_token)

"""iter_sessions, iter_messages and iter_memories read their pages only as they are used."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio
import pytest
from contextd_client import AsyncContextClient, ContextClient


class CountingInterceptor(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Counts the unary calls of each method."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        self.calls.append(details.method.rsplit("/", 1)[-1])
        return continuation(details, request)


def new_user() -> str:
    return f"pages-{uuid.uuid4().hex[:8]}"


def test_pages_are_read_as_the_items_are_used(address: str) -> None:
    counter = CountingInterceptor()
    channel = grpc.intercept_channel(grpc.insecure_channel(address), counter)
    user = new_user()
    with ContextClient(channel=channel) as client:
        for title in ("one", "two", "three"):
            client.create_session(user, title=title)
        for text in ("tea", "jazz", "cats"):
            client.add_memory(user, text)
        session = client.list_sessions(user)[0]
        client.append_messages(
            user,
            session["id"],
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
        )
        for method, items, count in (
            ("ListSessions", client.iter_sessions(user, page_size=1), 3),
            ("ListMemories", client.iter_memories(user, page_size=1), 3),
            ("ListMessages", client.iter_messages(user, session["id"], page_size=1), 2),
        ):
            counter.calls.clear()
            first = next(items)
            assert counter.calls == [method]  # one page for the first item
            second = next(items)
            assert counter.calls == [method, method]
            assert len([first, second, *items]) == count
        assert [s["title"] for s in client.iter_sessions(user)] == ["three", "two", "one"]
        assert list(itertools.islice(client.iter_memories(user, page_size=2), 1)) == [
            client.list_memories(user)[0]
        ]
    channel.close()


def test_arguments_are_checked_at_the_call(client: ContextClient) -> None:
    with pytest.raises(TypeError, match="page_size"):
        client.iter_sessions("ada", page_size="2")  # type: ignore[arg-type]


async def test_async_pages(client: ContextClient, aclient: AsyncContextClient) -> None:
    user = new_user()
    for title in ("one", "two", "three"):
        client.create_session(user, title=title)
    titles = [s["title"] async for s in aclient.iter_sessions(user, page_size=2)]
    assert titles == ["three", "two", "one"]
    assert titles == [s["title"] for s in await aclient.list_sessions(user, page_size=1)]
    with pytest.raises(TypeError, match="page_size"):
        aclient.iter_memories(user, page_size=None)  # type: ignore[arg-type]

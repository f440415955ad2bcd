"""Scopes, metadata and time ranges on AddMemory, and the filters of SearchMemories and
ListMemories, on SQLite and on PostgreSQL: equality on agent, app and metadata, created
and updated ranges, expiry (out of every read at once), the memories a session's build
sees, and bad filters and memories refused, naming the field, storing nothing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb
from google.protobuf.timestamp_pb2 import Timestamp

pytestmark = pytest.mark.both_backends

Stub = memory_pb2_grpc.MemoryServiceStub


@pytest.fixture(scope="module")
def channel(address: str) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(address) as ch:
        yield ch


@pytest.fixture(scope="module")
def memory(channel: grpc.Channel) -> Stub:
    return memory_pb2_grpc.MemoryServiceStub(channel)


def at(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def add(stub: Stub, user: str, content: str, **fields: Any) -> mpb.Memory:
    return stub.AddMemory(mpb.AddMemoryRequest(user_id=user, content=content, **fields)).memory  # type: ignore[no-any-return]


def found(stub: Stub, user: str, query: str, **f: Any) -> list[str]:
    request = mpb.SearchMemoriesRequest(user_id=user, query=query, filter=mpb.MemoryFilter(**f))
    return sorted(r.memory.content for r in stub.SearchMemories(request).results)


def listed(stub: Stub, user: str, **f: Any) -> list[str]:
    request = mpb.ListMemoriesRequest(user_id=user, filter=mpb.MemoryFilter(**f))
    return sorted(m.content for m in stub.ListMemories(request).memories)


@pytest.fixture(scope="module")
def scoped(memory: Stub) -> tuple[str, float]:
    """A user with memories of no scope, of apps, of an agent, with metadata; and a time
    between the first two and the others."""
    user = f"u-{uuid.uuid4().hex[:10]}"
    add(memory, user, "Likes short tea breaks")
    add(memory, user, "Tea with lemon", metadata={"topic": "food", "source": "chat"})
    time.sleep(0.05)
    middle = time.time()
    time.sleep(0.05)
    add(memory, user, "Tea tables in Word", scope=mpb.MemoryScope(app="word"))
    add(memory, user, "Tea charts in Excel", scope=mpb.MemoryScope(app="excel"))
    add(
        memory,
        user,
        "Planner books tea slots",
        scope=mpb.MemoryScope(agent="planner", app="word"),
        metadata={"topic": "food"},
    )
    return user, middle


EVERY = [
    "Likes short tea breaks",
    "Planner books tea slots",
    "Tea charts in Excel",
    "Tea tables in Word",
    "Tea with lemon",
]


@pytest.mark.parametrize(
    ("f", "expected"),
    [
        ({}, EVERY),
        ({"app": "word"}, ["Planner books tea slots", "Tea tables in Word"]),
        ({"app": ""}, ["Likes short tea breaks", "Tea with lemon"]),
        ({"agent": "planner"}, ["Planner books tea slots"]),
        ({"agent": "", "app": "word"}, ["Tea tables in Word"]),
        ({"metadata": {"topic": "food"}}, ["Planner books tea slots", "Tea with lemon"]),
        ({"metadata": {"topic": "food", "source": "chat"}}, ["Tea with lemon"]),
        ({"metadata": {"topic": "drink"}}, []),
        ({"app": "excel", "metadata": {"topic": "food"}}, []),
    ],
)
def test_equality_on_scope_and_metadata(
    memory: Stub, scoped: tuple[str, float], f: dict[str, Any], expected: list[str]
) -> None:
    user, _ = scoped
    assert found(memory, user, "tea", **f) == expected
    assert listed(memory, user, **f) == expected


def test_time_ranges(memory: Stub, scoped: tuple[str, float]) -> None:
    user, middle = scoped
    early = ["Likes short tea breaks", "Tea with lemon"]
    late = [c for c in EVERY if c not in early]
    for name in ("created", "updated"):
        assert listed(memory, user, **{f"{name}_before": at(middle)}) == early
        assert found(memory, user, "tea", **{f"{name}_after": at(middle)}) == late
    assert listed(memory, user, created_after=at(middle), created_before=at(middle)) == []
    # Stating a memory again moves its updated time, not its created time.
    add(memory, user, "likes short tea breaks.")
    assert "Likes short tea breaks" in listed(memory, user, updated_after=at(middle))
    assert "Likes short tea breaks" not in listed(memory, user, created_after=at(middle))


def test_pages_keep_their_filter(memory: Stub, scoped: tuple[str, float]) -> None:
    user, _ = scoped
    request = mpb.ListMemoriesRequest(
        user_id=user, page_size=1, filter=mpb.MemoryFilter(app="word")
    )
    first = memory.ListMemories(request)
    assert len(first.memories) == 1 and first.next_page_token
    request.page_token = first.next_page_token
    second = memory.ListMemories(request)
    assert [m.content for m in [*first.memories, *second.memories]] == [
        "Planner books tea slots",
        "Tea tables in Word",
    ]
    request.filter.app = "excel"  # another filter: the token is not its own
    with pytest.raises(grpc.RpcError) as refused:
        memory.ListMemories(request)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_the_same_text_is_one_memory_per_scope(memory: Stub) -> None:
    user = f"u-{uuid.uuid4().hex[:10]}"
    plain = add(memory, user, "Uses dark mode")
    again = memory.AddMemory(mpb.AddMemoryRequest(user_id=user, content="uses dark mode."))
    assert not again.created and again.memory.id == plain.id
    in_word = memory.AddMemory(
        mpb.AddMemoryRequest(
            user_id=user, content="Uses dark mode", scope=mpb.MemoryScope(app="word")
        )
    )
    assert in_word.created and in_word.memory.id != plain.id
    # A memory given an end is a dated fact of its own.
    ended = memory.AddMemory(
        mpb.AddMemoryRequest(
            user_id=user, content="Uses dark mode", valid_from=at(1e9), valid_to=at(1.1e9)
        )
    )
    assert ended.created
    assert found(memory, user, "dark mode", as_of=at(1.05e9)) == ["Uses dark mode"]
    assert len(listed(memory, user)) == 2


def test_expired_memories_are_out_of_every_read_at_once(memory: Stub) -> None:
    user = f"u-{uuid.uuid4().hex[:10]}"
    add(memory, user, "Parking spot 42 today", expire_time=at(time.time() + 1.0))
    add(memory, user, "Parking is free on Sundays")
    assert found(memory, user, "parking") == ["Parking is free on Sundays", "Parking spot 42 today"]
    time.sleep(1.2)
    assert found(memory, user, "parking") == ["Parking is free on Sundays"]
    assert listed(memory, user) == ["Parking is free on Sundays"]
    assert listed(memory, user, as_of=at(time.time() - 1.0)) == ["Parking is free on Sundays"]


def test_a_session_build_sees_its_host_app_and_unscoped_memories(
    channel: grpc.Channel, memory: Stub, scoped: tuple[str, float]
) -> None:
    user, _ = scoped
    sessions = sessions_pb2_grpc.SessionServiceStub(channel)
    context = context_pb2_grpc.ContextServiceStub(channel)
    session = sessions.CreateSession(spb.CreateSessionRequest(user_id=user, host="word")).session
    built = context.BuildMessages(
        pb.BuildMessagesRequest(
            session=pb.SessionContext(user_id=user, session_id=session.id, memory_limit=10),
            user_message="tea",
            token_budget=8000,
        )
    )
    system = "\n".join(m.content for m in built.messages if m.role == pb.ROLE_SYSTEM)
    shown = sorted(c for c in EVERY if f"- {c}" in system)
    assert shown == ["Likes short tea breaks", "Tea tables in Word", "Tea with lemon"]


BAD_ADDS: list[tuple[dict[str, Any], str]] = [
    ({"scope": mpb.MemoryScope(agent="x" * 65)}, "scope.agent"),
    ({"scope": mpb.MemoryScope(app="has space")}, "scope.app"),
    ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ({"metadata": {"k" * 65: "v"}}, "metadata"),
    ({"metadata": {"": "v"}}, "metadata"),
    ({"metadata": {"k": "v" * 257}}, "metadata"),
    ({"metadata": {"k": "line\nbreak"}}, "metadata"),
    ({"valid_from": at(2e9), "valid_to": at(1e9)}, "valid_to"),
    ({"expire_time": at(1e9)}, "expire_time"),
    ({"valid_from": Timestamp(seconds=10**12)}, "valid_from"),
]


@pytest.mark.parametrize(("fields", "field"), BAD_ADDS)
def test_bad_memories_are_refused_naming_the_field(
    memory: Stub, fields: dict[str, Any], field: str
) -> None:
    user = f"u-{uuid.uuid4().hex[:10]}"
    with pytest.raises(grpc.RpcError) as refused:
        add(memory, user, "a fact", **fields)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = refused.value.details() or ""
    assert details.startswith(field) and "x" * 65 not in details and "v" * 257 not in details
    assert listed(memory, user) == []


BAD_FILTERS: list[tuple[dict[str, Any], str]] = [
    ({"agent": "x" * 65}, "filter.agent"),
    ({"app": "tab\there"}, "filter.app"),
    ({"metadata": {f"k{i}": "v" for i in range(17)}}, "filter.metadata"),
    ({"as_of": Timestamp(seconds=-(10**12))}, "filter.as_of"),
    ({"created_after": Timestamp(nanos=-1)}, "filter.created_after"),
]


@pytest.mark.parametrize(("f", "field"), BAD_FILTERS)
def test_bad_filters_are_refused_naming_the_field(
    memory: Stub, f: dict[str, Any], field: str
) -> None:
    for call in (
        lambda: memory.SearchMemories(
            mpb.SearchMemoriesRequest(user_id="someone", query="tea", filter=mpb.MemoryFilter(**f))
        ),
        lambda: memory.ListMemories(
            mpb.ListMemoriesRequest(user_id="someone", filter=mpb.MemoryFilter(**f))
        ),
    ):
        with pytest.raises(grpc.RpcError) as refused:
            call()
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (refused.value.details() or "").startswith(field)

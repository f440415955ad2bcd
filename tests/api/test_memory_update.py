"""UpdateMemory and ListMemoryHistory on a live server, on SQLite and on PostgreSQL: a
correction and a supersession, the history of both, searches as of a past time, and the
refusals (bad input, another user's memory, a superseded one, a text already held), each
of which changes nothing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import memory_pb2_grpc
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.timestamp_pb2 import Timestamp

pytestmark = pytest.mark.both_backends

Stub = memory_pb2_grpc.MemoryServiceStub


@pytest.fixture(scope="module")
def memory(address: str) -> Iterator[Stub]:
    with grpc.insecure_channel(address) as channel:
        yield memory_pb2_grpc.MemoryServiceStub(channel)


def new_user() -> str:
    return f"u-{uuid.uuid4().hex[:10]}"


def at(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def add(stub: Stub, user: str, content: str, **fields: Any) -> mpb.Memory:
    request = mpb.AddMemoryRequest(user_id=user, content=content, **fields)
    return stub.AddMemory(request).memory  # type: ignore[no-any-return]


def update(
    stub: Stub, user: str, memory_id: str, paths: list[str], supersede: bool = False, **memory: Any
) -> mpb.Memory:
    request = mpb.UpdateMemoryRequest(
        user_id=user,
        memory_id=memory_id,
        memory=mpb.Memory(**memory),
        update_mask=FieldMask(paths=paths),
        supersede=supersede,
    )
    return stub.UpdateMemory(request).memory  # type: ignore[no-any-return]


def search(stub: Stub, user: str, query: str, **filter_fields: Any) -> list[str]:
    request = mpb.SearchMemoriesRequest(
        user_id=user, query=query, filter=mpb.MemoryFilter(**filter_fields)
    )
    return [r.memory.content for r in stub.SearchMemories(request).results]


def listed(stub: Stub, user: str, **filter_fields: Any) -> list[mpb.Memory]:
    request = mpb.ListMemoriesRequest(user_id=user, filter=mpb.MemoryFilter(**filter_fields))
    return list(stub.ListMemories(request).memories)


def history(
    stub: Stub, user: str, memory_id: str = "", **page: Any
) -> mpb.ListMemoryHistoryResponse:
    request = mpb.ListMemoryHistoryRequest(user_id=user, memory_id=memory_id, **page)
    return stub.ListMemoryHistory(request)  # type: ignore[no-any-return]


def refused(call: Callable[[], object]) -> tuple[grpc.StatusCode, str]:
    try:
        call()
    except grpc.RpcError as error:
        return error.code(), error.details() or ""
    raise AssertionError("the call was not refused")


def test_a_correction_changes_the_text_in_place_and_keeps_the_old_in_the_history(
    memory: Stub,
) -> None:
    user = new_user()
    added = add(memory, user, "I live in Lisbn")
    fixed = update(memory, user, added.id, ["content"], content="I live in Lisbon")
    assert (fixed.id, fixed.content) == (added.id, "I live in Lisbon")
    assert fixed.valid_from == added.valid_from and not fixed.HasField("valid_to")
    assert search(memory, user, "Lisbon") == ["I live in Lisbon"]
    assert search(memory, user, "Lisbn") == []
    # A correction leaves no superseded fact: only the history has the old wording.
    assert [m.content for m in listed(memory, user, as_of=at(time.time() - 0.001))] == [
        "I live in Lisbon"
    ]
    [change] = history(memory, user, added.id).changes
    assert (change.memory_id, change.action, change.method) == (added.id, "update", "api")
    assert (change.old_content, change.new_content) == ("I live in Lisbn", "I live in Lisbon")
    assert change.replaced_memory_id == ""


def test_a_superseded_fact_stays_out_of_search_but_is_found_as_of_its_time(
    memory: Stub,
) -> None:
    user = new_user()
    old = add(memory, user, "I work as a nurse in Porto")
    before = time.time()
    time.sleep(0.05)
    new = update(
        memory, user, old.id, ["content"], supersede=True, content="I work as a teacher in Porto"
    )
    assert new.id == old.id and new.content == "I work as a teacher in Porto"
    assert new.valid_from.ToNanoseconds() > old.valid_from.ToNanoseconds()
    assert search(memory, user, "nurse Porto") == ["I work as a teacher in Porto"]
    assert [m.content for m in listed(memory, user)] == ["I work as a teacher in Porto"]
    # As of a time before the change, the old fact, and only it.
    assert search(memory, user, "nurse Porto", as_of=at(before)) == ["I work as a nurse in Porto"]
    [past] = listed(memory, user, as_of=at(before))
    assert past.superseded_by == old.id and past.id != old.id
    assert past.valid_to == new.valid_from and past.create_time == old.create_time
    # The history names the memory that keeps the old text.
    [change] = history(memory, user, old.id).changes
    assert change.replaced_memory_id == past.id and change.old_content == old.content
    # A superseded fact is not changed; deleting the memory deletes its past too.
    code, details = refused(lambda: update(memory, user, past.id, ["content"], content="x"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and old.id in details
    memory.DeleteMemory(mpb.DeleteMemoryRequest(user_id=user, memory_id=old.id))
    assert listed(memory, user, as_of=at(before)) == []
    assert list(history(memory, user).changes) == []


def test_supersede_from_a_given_time(memory: Stub) -> None:
    user = new_user()
    old = add(memory, user, "My manager is Rui", valid_from=at(1_600_000_000))
    new = update(
        memory,
        user,
        old.id,
        ["content", "valid_from"],
        supersede=True,
        content="My manager is Ana",
        valid_from=at(1_700_000_000),
    )
    assert new.valid_from.seconds == 1_700_000_000
    assert search(memory, user, "manager", as_of=at(1_650_000_000)) == ["My manager is Rui"]
    assert search(memory, user, "manager", as_of=at(1_750_000_000)) == ["My manager is Ana"]
    assert search(memory, user, "manager", as_of=at(1_500_000_000)) == []


def test_scope_metadata_validity_and_expiry_change_and_clear(memory: Stub) -> None:
    user = new_user()
    expires = time.time() + 3600
    added = add(
        memory,
        user,
        "Prefers formal letters",
        scope=mpb.MemoryScope(app="word"),
        metadata={"topic": "style"},
        expire_time=at(expires),
    )
    assert added.scope.app == "word" and dict(added.metadata) == {"topic": "style"}
    changed = update(
        memory,
        user,
        added.id,
        ["scope", "metadata", "expire_time"],
        scope=mpb.MemoryScope(agent="writer", app="outlook"),
        metadata={"topic": "tone", "lang": "en"},
    )
    assert (changed.scope.agent, changed.scope.app) == ("writer", "outlook")
    assert dict(changed.metadata) == {"topic": "tone", "lang": "en"}
    assert not changed.HasField("expire_time")  # named and unset: cleared
    assert [m.id for m in listed(memory, user, metadata={"topic": "tone"})] == [added.id]
    assert listed(memory, user, metadata={"topic": "style"}) == []
    assert [m.id for m in listed(memory, user, app="outlook", agent="writer")] == [added.id]
    # Given an end in the past, it is no longer current, and true as of before.
    code, _ = refused(
        lambda: update(memory, user, added.id, ["valid_to"], valid_to=at(time.time() - 60))
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT  # before its valid_from
    now = time.time()
    ended = update(
        memory,
        user,
        added.id,
        ["valid_from", "valid_to"],
        valid_from=at(now - 600),
        valid_to=at(now - 60),
    )
    assert ended.HasField("valid_to") and listed(memory, user) == []
    assert [m.id for m in listed(memory, user, as_of=at(time.time() - 120))] == [added.id]
    # Metadata and scope changes are no text change: no history row.
    assert list(history(memory, user, added.id).changes) == []


def test_history_pages_newest_first(memory: Stub) -> None:
    user = new_user()
    first = add(memory, user, "Fact zero")
    second = add(memory, user, "Other zero")
    for n in ("one", "two", "three"):
        update(memory, user, first.id, ["content"], content=f"Fact {n}")
    update(memory, user, second.id, ["content"], content="Other one")
    page = history(memory, user, page_size=3)
    assert [c.new_content for c in page.changes] == ["Other one", "Fact three", "Fact two"]
    rest = history(memory, user, page_size=3, page_token=page.next_page_token)
    assert [c.new_content for c in rest.changes] == ["Fact one"] and not rest.next_page_token
    assert [c.new_content for c in history(memory, user, first.id).changes] == [
        "Fact three",
        "Fact two",
        "Fact one",
    ]
    code, _ = refused(lambda: history(memory, user, second.id, page_token=page.next_page_token))
    assert code == grpc.StatusCode.INVALID_ARGUMENT


def test_refused_updates_change_nothing(memory: Stub) -> None:
    user, other = new_user(), new_user()
    mine = add(memory, user, "I like tea")
    add(memory, user, "I like coffee")
    theirs = add(memory, other, "I like jazz")
    cases: list[tuple[Callable[[], object], grpc.StatusCode, str]] = [
        (
            lambda: update(memory, user, mine.id, [], content="x"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "update_mask",
        ),
        (
            lambda: update(memory, user, mine.id, ["text"], content="x"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "update_mask",
        ),
        (
            lambda: update(memory, user, mine.id, ["content"], content="   "),
            grpc.StatusCode.INVALID_ARGUMENT,
            "memory.content",
        ),
        (
            lambda: update(memory, user, mine.id, ["content"], content="x" * 4001),
            grpc.StatusCode.INVALID_ARGUMENT,
            "memory.content",
        ),
        (
            lambda: update(memory, user, mine.id, ["metadata"], supersede=True),
            grpc.StatusCode.INVALID_ARGUMENT,
            "supersede",
        ),
        (
            lambda: update(memory, user, mine.id, ["scope"], scope=mpb.MemoryScope(app="a b")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "memory.scope.app",
        ),
        (
            lambda: update(memory, user, mine.id, ["expire_time"], expire_time=at(1000)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "memory.expire_time",
        ),
        (
            lambda: update(memory, user, mine.id, ["valid_to"], valid_to=at(0), valid_from=at(10)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "memory.valid_to",
        ),
        (
            lambda: update(memory, user, mine.id, ["content"], content="I like coffee."),
            grpc.StatusCode.FAILED_PRECONDITION,
            "already says this",
        ),
        (
            lambda: update(memory, user, theirs.id, ["content"], content="mine now"),
            grpc.StatusCode.NOT_FOUND,
            "",
        ),
        (
            lambda: update(memory, user, "99999999", ["content"], content="x"),
            grpc.StatusCode.NOT_FOUND,
            "",
        ),
        (lambda: history(memory, user, theirs.id), grpc.StatusCode.NOT_FOUND, ""),
        (lambda: history(memory, user, "99999999"), grpc.StatusCode.NOT_FOUND, ""),
        (
            lambda: history(memory, user, page_size=201),
            grpc.StatusCode.INVALID_ARGUMENT,
            "page_size",
        ),
    ]
    for call, code, words in cases:
        got, details = refused(call)
        assert got == code, (code, details)
        assert words in details, details
        assert len(details) < 400  # bounded, never the input echoed
    assert [(m.content, dict(m.metadata)) for m in listed(memory, user)] == [
        ("I like coffee", {}),
        ("I like tea", {}),
    ]
    assert [m.content for m in listed(memory, other)] == ["I like jazz"]
    assert list(history(memory, user).changes) == [] and list(history(memory, other).changes) == []

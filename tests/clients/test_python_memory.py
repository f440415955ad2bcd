"""The Python clients' memory calls against a live server: scopes, metadata, validity and
expiry on add; filters on search and list; update_memory (a correction, a supersession,
cleared fields) and the memory history, sync and async; bad arguments refused before a
call."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from contextd_client import AsyncContextClient, ContextClient, ContextdError


def new_user() -> str:
    return f"py-{uuid.uuid4().hex[:10]}"


def test_scopes_metadata_and_filters(client: ContextClient) -> None:
    user = new_user()
    expires = datetime.now(UTC) + timedelta(days=1)
    word = client.add_memory(
        user,
        "Prefers tables with borders",
        scope={"app": "word"},
        metadata={"topic": "style"},
        expire_time=expires,
    )
    client.add_memory(user, "Prefers tables sorted by date")
    assert word["scope"] == {"agent": "", "app": "word"} and word["metadata"] == {"topic": "style"}
    assert (
        word["expire_time"] is not None and abs(word["expire_time"] - expires).total_seconds() < 1
    )
    assert word["valid_from"] is not None and word["valid_to"] is None
    assert word["superseded_by"] == ""
    assert [m["id"] for m in client.list_memories(user, filter={"app": "word"})] == [word["id"]]
    hits = client.search_memories(user, "tables", filter={"metadata": {"topic": "style"}})
    assert [h["id"] for h in hits] == [word["id"]]
    unscoped = client.search_memories(user, "tables", filter={"app": ""})
    assert [h["content"] for h in unscoped] == ["Prefers tables sorted by date"]
    with pytest.raises(ValueError, match="no key 'topic'"):
        client.list_memories(user, filter={"topic": "style"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="aware datetime"):
        client.list_memories(user, filter={"as_of": datetime(2024, 1, 1)})
    with pytest.raises(ContextdError) as refused:
        client.add_memory(user, "x", scope={"app": "has space"})
    assert refused.value.violations[0].field == "scope.app"


def test_update_and_history(client: ContextClient) -> None:
    user = new_user()
    added = client.add_memory(user, "I work in Lisbn")
    fixed = client.update_memory(user, added["id"], {"content": "I work in Lisbon"})
    before = datetime.now(UTC)
    moved = client.update_memory(
        user, added["id"], {"content": "I work in Porto", "metadata": {"k": "v"}}, supersede=True
    )
    assert fixed["id"] == moved["id"] == added["id"] and moved["metadata"] == {"k": "v"}
    assert [m["content"] for m in client.search_memories(user, "work")] == ["I work in Porto"]
    [past] = client.list_memories(user, filter={"as_of": before})
    assert past["content"] == "I work in Lisbon" and past["superseded_by"] == added["id"]
    changes = client.list_memory_history(user, memory_id=added["id"], page_size=1)
    assert [(c["old_content"], c["new_content"], c["method"]) for c in changes] == [
        ("I work in Lisbon", "I work in Porto", "api"),
        ("I work in Lisbn", "I work in Lisbon", "api"),
    ]
    assert changes[0]["replaced_memory_id"] == past["id"] and changes[1]["replaced_memory_id"] == ""
    cleared = client.update_memory(user, added["id"], {"metadata": None})
    assert cleared["metadata"] == {}
    with pytest.raises(ValueError, match="no key 'text'"):
        client.update_memory(user, added["id"], {"text": "x"})
    with pytest.raises(TypeError, match="non-empty"):
        client.update_memory(user, added["id"], {})


async def test_the_async_client_has_the_same_calls(aclient: AsyncContextClient) -> None:
    user = new_user()
    added = await aclient.add_memory(user, "Likes jazz", scope={"agent": "dj"})
    updated = await aclient.update_memory(user, added["id"], {"content": "Likes cool jazz"})
    assert updated["scope"] == {"agent": "dj", "app": ""}
    assert await aclient.list_memories(user, filter={"agent": "nobody"}) == []
    found = await aclient.search_memories(user, "jazz", filter={"agent": "dj"})
    assert [f["content"] for f in found] == ["Likes cool jazz"]
    history = [c async for c in aclient.iter_memory_history(user)]
    assert [c["new_content"] for c in history] == ["Likes cool jazz"]

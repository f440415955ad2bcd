"""The record dicts the Python SDK returns have exactly the keys of their TypedDicts."""

from __future__ import annotations

import uuid
from datetime import datetime

from contextd_client import (
    AddedMemory,
    Collected,
    ContextClient,
    Memory,
    ScoredMemory,
    Session,
)


def test_records_have_the_keys_of_their_types(client: ContextClient) -> None:
    user = f"types-{uuid.uuid4().hex[:8]}"
    session = client.create_session(user, title="t")
    assert set(session) == Session.__required_keys__
    assert isinstance(session["create_time"], datetime)
    assert set(client.get_session(user, session["id"])) == Session.__required_keys__
    added = client.add_memory(user, "Likes tea.")
    assert set(added) == AddedMemory.__required_keys__ and added["created"] is True
    assert [set(m) for m in client.list_memories(user)] == [Memory.__required_keys__]
    found = client.search_memories(user, "tea")
    assert [set(m) for m in found] == [ScoredMemory.__required_keys__]
    turn = client.stream_chat("hi", user_id=user, session_id=session["id"]).result()
    collected = client.collect(user, turn.assistant_message_id)
    assert set(collected) == Collected.__required_keys__

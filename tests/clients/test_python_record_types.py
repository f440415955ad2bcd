"""The record dicts the Python SDK returns have the keys of their TypedDicts."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from contextd_client import (
    AddedMemory,
    Collected,
    ContextClient,
    DeletedCounts,
    Memory,
    ScoredMemory,
    Session,
    SessionEvent,
    Skill,
    StoredMessage,
    Template,
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


def _fits(record: Mapping[str, object], kind: Any) -> bool:
    """Whether a dict has every required key of its TypedDict and no key it lacks."""
    return bool(kind.__required_keys__ <= set(record) <= kind.__annotations__.keys())


def test_messages_prompts_events_and_counts_have_the_keys_of_their_types(
    client: ContextClient,
) -> None:
    user = f"types-{uuid.uuid4().hex[:8]}"
    session = client.create_session(user)
    stored = client.append_messages(user, session["id"], [{"role": "user", "content": "hi"}])
    listed = client.list_messages(user, session["id"])
    assert [_fits(m, StoredMessage) for m in stored + listed] == [True, True]
    client.stream_chat("hi", user_id=user, session_id=session["id"]).result()
    events = list(client.export_events(user, session["id"]))
    assert events and all(_fits(e, SessionEvent) for e in events)
    name = f"t{uuid.uuid4().hex[:8]}"
    assert _fits(client.upsert_template(name, "Be kind."), Template)
    assert all(_fits(t, Template) for t in client.list_templates())
    assert _fits(client.upsert_skill(name, "Be brief."), Skill)
    assert all(_fits(s, Skill) for s in client.list_skills())
    client.delete_skill(name)
    client.delete_template(name)
    assert set(client.delete_user(user)) == DeletedCounts.__required_keys__

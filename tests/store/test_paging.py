"""Page tokens on both engines: a garbled token, or one of another listing or kind, is
refused with a clear message."""

from __future__ import annotations

import base64
import json

import pytest
from contextd.store.conversation import ConversationRepo
from contextd.store.sessions import SessionRepo

from tests.support.store_helpers import make_sessions, user


async def test_bad_page_tokens_are_refused_clearly(
    sessions: SessionRepo, conversation: ConversationRepo
) -> None:
    await make_sessions(sessions, "alice", 3)
    await make_sessions(sessions, "bob", 3)
    _, alice_token = await sessions.list_sessions("alice", 1)
    session = await sessions.create("carol")
    await conversation.append(session.id, "carol", [user("a"), user("b")])
    _, messages_token = await conversation.list_messages(session.id, 1)
    assert alice_token and messages_token

    def encoded(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()

    garbage = ["%%%", "bm90IGpzb24", encoded({"a": 1}), encoded(["sessions"]), "é"]
    for token in garbage:
        with pytest.raises(ValueError, match="invalid page token"):
            await sessions.list_sessions("alice", 1, token)
    with pytest.raises(ValueError, match="belongs to another sessions listing"):
        await sessions.list_sessions("bob", 1, alice_token)
    with pytest.raises(ValueError, match="not a token of a sessions listing"):
        await sessions.list_sessions("alice", 1, messages_token)
    with pytest.raises(ValueError, match="not a token of a messages listing"):
        await conversation.list_messages(session.id, 1, alice_token)
    # Right kind and listing, but a position of the wrong shape.
    forged = json.loads(base64.urlsafe_b64decode(alice_token + "=="))
    forged[2] = "yesterday"
    with pytest.raises(ValueError, match="malformed position"):
        await sessions.list_sessions("alice", 1, encoded(forged).rstrip("="))

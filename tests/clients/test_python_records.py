"""The SDK's stored-data calls against a live server: Collect, sessions, memories, prompts.

Good paths check the dicts both clients return; bad paths check the status code and
the field the server names, and what the client refuses before sending.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime

import grpc
import pytest
from contextd_client import AsyncContextClient, ContextClient, ContextdError


@pytest.fixture(scope="module")
def client(address: str) -> Iterator[ContextClient]:
    with ContextClient(address) as c:
        yield c


@pytest.fixture
async def aclient(address: str) -> AsyncIterator[AsyncContextClient]:
    async with AsyncContextClient(address) as c:
        yield c


@pytest.fixture
def user() -> str:
    return f"sdk-{uuid.uuid4().hex[:8]}"


def expect_error(call: Callable[[], object]) -> ContextdError:
    with pytest.raises(ContextdError) as info:
        call()
    return info.value


TURN = [
    {"role": "user", "content": "Where is the station?"},
    {"role": "assistant", "content": "Two streets north."},
]


# Collect ----------------------------------------------------------------------------


def test_collect_and_remember_then_uncollect(client: ContextClient, user: str) -> None:
    session = client.create_session(user)
    stored = client.append_messages(user, session["id"], TURN, turn_index=1)
    answer = stored[1]["id"]

    collected = client.collect(user, answer, remember=True)
    assert collected["is_collected"] and collected["memory_id"]
    assert client.collect(user, answer, remember=True)["memory_id"] == collected["memory_id"]
    memory = client.list_memories(user)[0]
    assert memory["content"] == "Two streets north."
    assert (memory["source_session_id"], memory["source_message_id"]) == (session["id"], answer)

    assert client.collect(user, answer, uncollect=True)["is_collected"] is False
    assert [m["is_collected"] for m in client.list_messages(user, session["id"])] == [False] * 2


def test_collect_bad_paths(client: ContextClient, user: str) -> None:
    session = client.create_session(user)
    answer = client.append_messages(user, session["id"], TURN)[1]["id"]
    assert expect_error(lambda: client.collect(user, "999999999")).code == (
        grpc.StatusCode.NOT_FOUND
    )
    other = expect_error(lambda: client.collect("someone-else", answer))
    assert other.code == grpc.StatusCode.NOT_FOUND  # another user's: as if it did not exist
    missing = expect_error(lambda: client.collect(user, ""))
    assert missing.code == grpc.StatusCode.INVALID_ARGUMENT
    assert missing.fields == ["message_id"]


# Sessions ---------------------------------------------------------------------------


def test_append_messages_returns_them_stored(client: ContextClient, user: str) -> None:
    session = client.create_session(user)
    tool_turn = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "weather"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    stored = client.append_messages(user, session["id"], tool_turn, turn_index=3)
    assert [(m["seq"], m["role"], m["turn_index"]) for m in stored] == [
        (0, "user", 3),
        (1, "assistant", 3),
        (2, "tool", 3),
    ]
    assert stored[1]["tool_calls"] == [{"id": "c1", "name": "weather", "arguments": ""}]
    assert stored[2]["tool_call_id"] == "c1"
    assert isinstance(stored[0]["create_time"], datetime)
    assert stored[0]["create_time"].tzinfo == UTC
    assert client.list_messages(user, session["id"]) == stored


def test_append_messages_names_the_bad_field(client: ContextClient, user: str) -> None:
    session = client.create_session(user)
    error = expect_error(
        lambda: client.append_messages(user, session["id"], [{"role": "system", "content": "x"}])
    )
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.fields == ["messages[0].role"]
    assert client.list_messages(user, session["id"]) == []  # nothing stored


def test_compression_summary_ids_and_errors(client: ContextClient, user: str) -> None:
    session = client.create_session(user)
    ids = [m["id"] for m in client.append_messages(user, session["id"], TURN + TURN)]
    first = client.add_compression_summary(user, session["id"], ids[:2], "First turn.")
    second = client.add_compression_summary(
        user, session["id"], ids[1:3], "More.", start_message_id=ids[1]
    )
    assert first and second and first != second

    unknown = expect_error(
        lambda: client.add_compression_summary(user, session["id"], ["999999999"], "x")
    )
    assert unknown.code == grpc.StatusCode.NOT_FOUND
    assert "message_ids[0]" in unknown.message
    blank = expect_error(lambda: client.add_compression_summary(user, session["id"], ids, " "))
    assert blank.code == grpc.StatusCode.INVALID_ARGUMENT
    assert blank.fields == ["summary"]
    with pytest.raises(TypeError, match="message_ids must be a sequence of ids"):
        client.add_compression_summary(user, session["id"], "1", "x")


def test_list_sessions_pages_and_scopes(client: ContextClient, user: str) -> None:
    made = [client.create_session(user, title=f"s{i}")["id"] for i in range(3)]
    assert [s["id"] for s in client.list_sessions(user, page_size=2)] == made[::-1]
    assert client.list_sessions(f"{user}-nobody") == []


def test_delete_session_and_summary_bad_paths(client: ContextClient, user: str) -> None:
    session = client.create_session(user)
    denied = expect_error(lambda: client.set_session_summary("intruder", session["id"], "x"))
    assert denied.code == grpc.StatusCode.NOT_FOUND
    denied = expect_error(lambda: client.delete_session("intruder", session["id"]))
    assert denied.code == grpc.StatusCode.NOT_FOUND
    client.set_session_summary(user, session["id"], "A summary.")
    client.delete_session(user, session["id"])
    gone = expect_error(lambda: client.delete_session(user, session["id"]))
    assert gone.code == grpc.StatusCode.NOT_FOUND


# Memories ---------------------------------------------------------------------------


def test_memories_add_search_list_delete(client: ContextClient, user: str) -> None:
    session = client.create_session(user)
    first = client.add_memory(user, "Likes jazz records.", source_session_id=session["id"])
    assert first["created"] and first["source_session_id"] == session["id"]
    assert first["create_time"] is not None and first["create_time"].tzinfo == UTC
    client.add_memory(user, "Plays the cello.")
    hits = client.search_memories(user, "jazz")
    assert [h["content"] for h in hits] == ["Likes jazz records."]
    assert 0 < hits[0]["recency"] <= 1 and hits[0]["relevance"] > 0
    assert "explain" not in hits[0]
    [explained] = client.search_memories(user, "jazz", explain=True)
    parts = explained["explain"]
    # The test servers search by terms only: no cosine.
    assert parts["term_score"] is not None and parts["term_score"] > 0
    assert parts["cosine"] is None
    assert client.search_memories(f"{user}-other", "jazz") == []
    assert [m["content"] for m in client.list_memories(user, page_size=1)] == [
        "Plays the cello.",
        "Likes jazz records.",
    ]
    client.delete_memory(user, first["id"])
    assert client.search_memories(user, "jazz") == []


def test_memory_bad_paths(client: ContextClient, user: str) -> None:
    blank = expect_error(lambda: client.add_memory(user, "   "))
    assert blank.code == grpc.StatusCode.INVALID_ARGUMENT
    assert blank.fields == ["content"]
    limit = expect_error(lambda: client.search_memories(user, "x", limit=1000))
    assert limit.fields == ["limit"]
    memory = client.add_memory(user, "Owns a red bicycle.")
    denied = expect_error(lambda: client.delete_memory("intruder", memory["id"]))
    assert denied.code == grpc.StatusCode.NOT_FOUND
    client.delete_memory(user, memory["id"])
    gone = expect_error(lambda: client.delete_memory(user, memory["id"]))
    assert gone.code == grpc.StatusCode.NOT_FOUND


# Templates and skills ---------------------------------------------------------------


def test_template_versions_and_disable(client: ContextClient, user: str) -> None:
    scenario = f"{user}-scenario"
    assert client.upsert_template(scenario, "v1 {{x}}")["version"] == 1
    disabled = client.upsert_template(scenario, "v2 {{x}}", enabled=False)
    assert (disabled["version"], disabled["enabled"]) == (2, False)
    listed = next(t for t in client.list_templates() if t["scenario"] == scenario)
    assert listed == disabled
    client.delete_template(scenario)
    gone = expect_error(lambda: client.delete_template(scenario))
    assert gone.code == grpc.StatusCode.NOT_FOUND


def test_skills_by_app_and_errors(client: ContextClient, user: str) -> None:
    app = f"{user}-app"
    client.upsert_skill(f"{user}.on", "On.", apps=[app])
    client.upsert_skill(f"{user}.off", "Off.", apps=[app], enabled=False)
    mine = [s["name"] for s in client.list_skills(app=app) if s["name"].startswith(user)]
    assert sorted(mine) == [f"{user}.off", f"{user}.on"]
    enabled = [s["name"] for s in client.list_skills(app=app, enabled_only=True)]
    assert f"{user}.on" in enabled and f"{user}.off" not in enabled

    bad = expect_error(lambda: client.upsert_skill("no spaces", "x"))
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT
    assert bad.fields == ["skill.name"]
    with pytest.raises(TypeError, match="apps must be a sequence of strings"):
        client.upsert_skill(f"{user}.x", "x", apps="web")
    for name in (f"{user}.on", f"{user}.off"):
        client.delete_skill(name)
    assert expect_error(lambda: client.delete_skill(f"{user}.on")).code == (
        grpc.StatusCode.NOT_FOUND
    )


# Session mode of build_messages -------------------------------------------------------


def test_session_mode_build_and_its_local_checks(client: ContextClient, user: str) -> None:
    session = client.create_session(user, title="Trip")
    client.append_messages(user, session["id"], TURN)
    client.add_memory(user, "Prefers window seats.")
    on = client.build_messages(
        "Book seats", token_budget=1000, session={"user_id": user, "session_id": session["id"]}
    )
    off = client.build_messages(
        "Book seats",
        token_budget=1000,
        session={"user_id": user, "session_id": session["id"], "memory": False},
    )
    assert "Prefers window seats." in on.messages[0]["content"]
    assert "Prefers window seats." not in off.messages[0]["content"]
    assert [m["content"] for m in on.messages[1:]] == [*(m["content"] for m in TURN), "Book seats"]
    notes = {layer.name: layer.note for layer in off.report.context_layers}
    assert "off" in notes["memory"]
    # The memory layer changes the first message: nothing is a cacheable prefix then.
    assert on.report.cacheable_prefix_tokens == 0
    report = off.report
    assert report.cacheable_prefix_tokens == report.total_tokens - report.user_message_tokens > 0
    stable = client.build_messages(
        "Book seats",
        token_budget=1000,
        session={"user_id": user, "session_id": session["id"], "cache_layout": "stable_prefix"},
    )
    assert [m["role"] for m in stable.messages] == ["system", "user", "assistant", "system", "user"]
    assert stable.messages[3]["content"].endswith("Prefers window seats.")
    prefix = stable.report.cacheable_prefix_tokens
    assert prefix == sum(m["tokens"] for m in stable.messages[:3])
    with pytest.raises(ValueError, match="cache_layout"):
        client.build_messages("x", token_budget=10, session={"user_id": user, "cache_layout": "on"})

    with pytest.raises(ValueError, match="session has no key 'sesion_id'"):
        client.build_messages("x", token_budget=10, session={"user_id": user, "sesion_id": "1"})
    with pytest.raises(TypeError, match="memory"):
        client.build_messages("x", token_budget=10, session={"user_id": user, "memory": "off"})
    mixed = expect_error(
        lambda: client.build_messages(
            "x",
            token_budget=100,
            history=TURN,
            session={"user_id": user, "session_id": session["id"]},
        )
    )
    assert mixed.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "history" in mixed.fields


# Async client -----------------------------------------------------------------------


async def test_async_client_covers_the_same_calls(aclient: AsyncContextClient, user: str) -> None:
    session = await aclient.create_session(user)
    stored = await aclient.append_messages(user, session["id"], TURN, turn_index=1)
    summary_id = await aclient.add_compression_summary(
        user, session["id"], [stored[0]["id"]], "Asked."
    )
    await aclient.set_session_summary(user, session["id"], "Directions.")
    assert summary_id
    assert [s["id"] for s in await aclient.list_sessions(user)] == [session["id"]]
    collected = await aclient.collect(user, stored[1]["id"], remember=True)
    memory = await aclient.add_memory(user, "Walks everywhere.")
    hits = await aclient.search_memories(user, "walks")
    assert [h["id"] for h in hits] == [memory["id"]]
    listed = [m["id"] for m in await aclient.list_memories(user)]
    assert listed == [memory["id"], collected["memory_id"]]
    build = await aclient.build_messages(
        "Thanks", token_budget=1000, session={"user_id": user, "session_id": session["id"]}
    )
    assert build.messages[1]["content"].endswith("Asked.")

    scenario = f"{user}-async"
    assert (await aclient.upsert_template(scenario, "T"))["scenario"] == scenario
    assert scenario in [t["scenario"] for t in await aclient.list_templates()]
    assert (await aclient.upsert_skill(scenario, "S", apps=[scenario]))["apps"] == [scenario]
    assert [s["name"] for s in await aclient.list_skills(app=scenario)][-1:] == [scenario]
    await aclient.delete_skill(scenario)
    await aclient.delete_template(scenario)
    await aclient.delete_memory(user, memory["id"])
    await aclient.delete_session(user, session["id"])
    with pytest.raises(ContextdError) as info:
        await aclient.get_session(user, session["id"])
    assert info.value.code == grpc.StatusCode.NOT_FOUND

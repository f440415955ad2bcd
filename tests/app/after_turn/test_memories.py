"""Memory extraction after a turn, on a real SQLite database: the rule fallback (the echo
provider) and the model's facts, with provenance and history; a bad model answer falls
back to the rules."""

from __future__ import annotations

import json
import logging

import pytest
from contextd.core.memory_facts import RULE_METHOD
from contextd.providers.errors import ProviderUnavailable

from tests.support.after_turn_env import USER, Env, ScriptedProvider, after_turn_records, run


async def test_echo_fallback_stores_facts_with_provenance(env: Env) -> None:
    runner = env.runner()
    assert not runner.use_model
    sid = await env.session()
    user_message, turn = await env.turn(sid, 1, "你好！我喜欢喝咖啡，我住在上海。", "echo: …")
    await run(runner, turn)

    assert await env.contents() == ["我住在上海", "我喜欢喝咖啡"]
    [hit] = await env.memories.search(USER, "咖啡")
    memory = hit.memory
    assert (memory.source_session_id, memory.source_message_id) == (sid, user_message.id)
    [change] = await env.history.for_memory(memory.id)
    assert (change.action, change.method, change.old_content, change.new_content) == (
        "add",
        RULE_METHOD,
        "",
        "我喜欢喝咖啡",
    )
    assert (change.source_session_id, change.source_message_id) == (sid, user_message.id)
    assert runner.stats.facts_added == 2 and runner.stats.failures == 0


async def test_duplicates_are_not_stored_twice(env: Env) -> None:
    runner = env.runner()
    sid = await env.session()
    _, first = await env.turn(sid, 1, "I like green tea.")
    await run(runner, first)
    [before] = (await env.memories.list_memories(USER))[0]
    _, second = await env.turn(sid, 2, "Honestly, i like green tea!")
    await run(runner, second)
    [after] = (await env.memories.list_memories(USER))[0]
    assert after.id == before.id and after.content == "I like green tea"
    assert after.updated_at >= before.updated_at
    assert len(await env.history.for_user(USER)) == 1  # only the add
    assert (runner.stats.facts_added, runner.stats.facts_restated) == (1, 1)


async def test_fallback_replacement_keeps_the_old_text_in_history(env: Env) -> None:
    runner = env.runner()
    sid = await env.session()
    _, first = await env.turn(sid, 1, "我叫小明")
    await run(runner, first)
    [original] = (await env.memories.list_memories(USER))[0]
    user_message, second = await env.turn(sid, 2, "其实我的名字是小红")
    await run(runner, second)

    [memory] = (await env.memories.list_memories(USER))[0]
    assert (memory.id, memory.content) == (original.id, "我叫小红")  # in place, same id
    assert memory.source_message_id == user_message.id
    add, update = await env.history.for_memory(memory.id)
    assert (add.action, add.new_content) == ("add", "我叫小明")
    assert (update.action, update.old_content, update.new_content, update.method) == (
        "update",
        "我叫小明",
        "我叫小红",
        RULE_METHOD,
    )
    assert update.source_message_id == user_message.id
    # The index follows: the new name is found, the old one is not.
    assert [h.memory.id for h in await env.memories.search(USER, "小红")] == [memory.id]
    assert await env.memories.search(USER, "小明") == []
    assert runner.stats.facts_updated == 1


async def test_questions_and_other_people_are_not_remembered(env: Env) -> None:
    runner = env.runner()
    sid = await env.session()
    for index, text in enumerate(["我叫什么?", "What do I like?", "他喜欢喝茶"], 1):
        _, turn = await env.turn(sid, index, text)
        await run(runner, turn)
    assert await env.contents() == []


async def test_users_do_not_share_memories(env: Env) -> None:
    runner = env.runner()
    _, alice = await env.turn(await env.session(), 1, "I live in Paris")
    _, bob = await env.turn(await env.session("bob"), 1, "I live in Rome", user="bob")
    await run(runner, alice)
    await run(runner, bob)
    assert await env.contents() == ["I live in Paris"]
    assert await env.contents("bob") == ["I live in Rome"]


async def test_model_facts_are_stored_with_the_model_as_method(env: Env) -> None:
    memory, _ = await env.memories.add(USER, "I live in Paris")
    provider = ScriptedProvider(
        facts=json.dumps(
            {
                "facts": [
                    {"text": "I live in Berlin", "replaces": "I live in Paris"},
                    {"text": "I have a cat named Tom"},
                    {"text": 7},
                ]
            }
        )
    )
    runner = env.runner(provider)
    assert runner.use_model
    sid = await env.session()
    user_message, turn = await env.turn(
        sid, 1, "I moved from Paris to Berlin last month with my cat Tom", "Nice!"
    )
    await run(runner, turn)

    [prompt] = provider.prompts("facts")
    assert json.dumps(["I live in Paris"]) in prompt  # the related memory was shown
    assert "I moved from Paris to Berlin" in prompt and "Nice!" in prompt
    assert await env.contents() == ["I have a cat named Tom", "I live in Berlin"]
    [update] = await env.history.for_memory(memory.id)
    assert (update.action, update.old_content, update.new_content, update.method) == (
        "update",
        "I live in Paris",
        "I live in Berlin",
        "llm:fake-model",
    )
    [cat] = await env.memories.search(USER, "cat Tom")
    [add] = await env.history.for_memory(cat.memory.id)
    assert (add.action, add.method, add.source_session_id, add.source_message_id) == (
        "add",
        "llm:fake-model",
        sid,
        user_message.id,
    )
    assert await env.session_summary(sid) == "A summary by the model."


async def test_model_cannot_replace_a_memory_it_was_not_shown(env: Env) -> None:
    await env.memories.add(USER, "I like tea")  # unrelated to the message: not shown
    provider = ScriptedProvider(
        facts='{"facts": [{"text": "I enjoy chess", "replaces": "I like tea"}]}'
    )
    runner = env.runner(provider)
    _, turn = await env.turn(await env.session(), 1, "chess is my hobby")
    await run(runner, turn)
    assert await env.contents() == ["I enjoy chess", "I like tea"]


async def test_replacement_by_an_existing_text_merges(env: Env) -> None:
    old, _ = await env.memories.add(USER, "I live in Paris")
    kept, _ = await env.memories.add(USER, "I live in Berlin")
    provider = ScriptedProvider(
        facts='{"facts": [{"text": "I live in Berlin.", "replaces": "I live in Paris"}]}'
    )
    runner = env.runner(provider)
    _, turn = await env.turn(await env.session(), 1, "I live in Berlin now, not Paris")
    await run(runner, turn)
    # "I live in Berlin." restates memory `kept`: a RESTATE, nothing replaced.
    assert await env.contents() == ["I live in Berlin", "I live in Paris"]
    # Replacing with a text another memory already holds supersedes the old one by it,
    # recorded: the old one is a fact of the past, out of what is current.
    replaced = await env.history.replace(old.id, USER, "I live in Paris", "I live in Berlin", "x")
    assert replaced is not None and replaced.memory.id == kept.id
    assert replaced.change is not None and replaced.change.action == "merge"
    assert replaced.change.replaced_memory_id == old.id
    assert replaced.change.old_content == "I live in Paris"
    assert await env.contents() == ["I live in Berlin"]
    past = await env.memories.get(old.id)
    assert past is not None and past.superseded_by == kept.id
    assert past.valid_to == replaced.change.changed_at


async def test_replace_refuses_a_memory_changed_since_it_was_read(env: Env) -> None:
    memory, _ = await env.memories.add(USER, "I live in Paris")
    history = env.history
    assert await history.replace(memory.id, USER, "I live in Rome", "I live in Oslo", "x") is None
    assert await history.replace(memory.id, "bob", "I live in Paris", "I live in Oslo", "x") is None
    assert await history.replace(memory.id + 99, USER, "x", "y", "x") is None
    same = await history.replace(memory.id, USER, "I live in Paris", "i live in paris.", "x")
    assert same is not None and same.change is None  # the same memory: only refreshed
    assert await env.contents() == ["I live in Paris"]
    with pytest.raises(ValueError):
        await history.replace(memory.id, USER, "I live in Paris", "  ", "x")


async def test_deleting_a_memory_deletes_its_history(env: Env) -> None:
    runner = env.runner()
    _, turn = await env.turn(await env.session(), 1, "我叫小明")
    await run(runner, turn)
    _, turn = await env.turn(turn.session_id, 2, "我叫小红")
    await run(runner, turn)
    [memory] = (await env.memories.list_memories(USER))[0]
    assert len(await env.history.for_memory(memory.id)) == 2
    assert await env.memories.delete(memory.id)
    assert await env.history.for_memory(memory.id) == []
    assert await env.history.for_user(USER) == []
    async with env.db.transaction() as conn:  # the search index is still consistent
        await conn.execute(
            "INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 0)"
        )


@pytest.mark.parametrize(
    "facts",
    [
        "I cannot help with that.",
        '{"facts": "I like tea"}',
        ProviderUnavailable("fake", "connection refused"),
        RuntimeError("a bug in the provider"),
    ],
)
async def test_bad_model_answers_fall_back_to_rules(
    env: Env, caplog: pytest.LogCaptureFixture, facts: str | Exception
) -> None:
    provider = ScriptedProvider(facts=facts)
    runner = env.runner(provider)
    _, turn = await env.turn(await env.session(), 1, "My name is Alice")
    with caplog.at_level(logging.WARNING, "contextd.after_turn"):
        await run(runner, turn)
    [memory] = (await env.memories.list_memories(USER))[0]
    assert memory.content == "My name is Alice"
    [change] = await env.history.for_memory(memory.id)
    assert change.method == RULE_METHOD
    assert runner.stats.model_fallbacks == 1 and runner.stats.failures == 0
    [record] = after_turn_records(caplog, logging.WARNING)
    assert "using the rule fallback" in record.getMessage()

"""Reconciliation after a turn by meaning: with memories embedded, a near-duplicate fact
is not stored twice and a new value of a single-valued fact supersedes the old one."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from contextd.app.memory_embedding import EmbeddingWorker, MeaningSearch, search_by_meaning
from contextd.store.engine.database import Database
from contextd.store.memory.vectors import MemoryVectorRepo

from tests.support.after_turn_env import USER, Env, ScriptedProvider, env_in, run
from tests.support.fake_embeddings import InProcessEmbedder

SYNONYMS = {"moved": "live", "vegetarian": "meat", "eat": "meat"}
# An Env whose memories are searched by meaning too, and the worker that embeds them.
ByMeaning = tuple[Env, EmbeddingWorker]


def _search(db: Database) -> MeaningSearch:
    embedder = InProcessEmbedder(synonyms=dict(SYNONYMS))
    # "I moved to Porto" and "I live in Lisbon" share one of their two concepts (0.5).
    embedder.same_subject_similarity = 0.45  # type: ignore[attr-defined]
    return search_by_meaning(embedder, MemoryVectorRepo(db, embedder.model))


@pytest.fixture
async def by_meaning(tmp_path: Path) -> AsyncIterator[ByMeaning]:
    async with env_in(tmp_path, _search) as env:
        assert env.meaning is not None
        yield env, env.meaning.worker


async def _facts_turn(env: Env, facts: list[str], text: str) -> None:
    provider = ScriptedProvider(facts=json.dumps({"facts": [{"text": f} for f in facts]}))
    runner = env.runner(provider)
    _, turn = await env.turn(await env.session(), 1, text)
    await run(runner, turn)


async def test_contradiction_by_meaning_supersedes_with_history(by_meaning: ByMeaning) -> None:
    env, worker = by_meaning
    memory, _ = await env.memories.add(USER, "I live in Lisbon")
    await env.memories.add(USER, "I work as a nurse")
    await worker.embed_pending()
    await _facts_turn(env, ["I moved to Porto"], "I moved to Porto last week")
    assert await env.contents() == ["I moved to Porto", "I work as a nurse"]
    [update] = await env.history.for_memory(memory.id)
    assert (update.action, update.old_content, update.new_content) == (
        "update",
        "I live in Lisbon",
        "I moved to Porto",
    )
    # The rewritten memory lost its old vector and gets a new one.
    vectors = MemoryVectorRepo(env.db, "fake-embed-1")
    assert await vectors.count_pending() == 1
    await worker.embed_pending()
    assert await vectors.count_pending() == 0


async def test_near_duplicate_is_not_stored_twice(by_meaning: ByMeaning) -> None:
    env, worker = by_meaning
    memory, _ = await env.memories.add(USER, "I am vegetarian")
    await worker.embed_pending()
    await _facts_turn(env, ["I am a vegetarian"], "As I said, I am a vegetarian")
    assert await env.contents() == ["I am vegetarian"]
    [after] = (await env.memories.list_memories(USER))[0]
    assert after.id == memory.id and after.updated_at >= memory.updated_at


async def test_unrelated_fact_is_added(by_meaning: ByMeaning) -> None:
    env, worker = by_meaning
    await env.memories.add(USER, "I live in Lisbon")
    await worker.embed_pending()
    await _facts_turn(env, ["I have a cat named Tom"], "I have a cat named Tom")
    assert await env.contents() == ["I have a cat named Tom", "I live in Lisbon"]


async def test_without_vectors_reconciliation_is_by_text(env: Env) -> None:
    await env.memories.add(USER, "I live in Lisbon")
    await _facts_turn(env, ["I moved to Porto"], "I moved to Porto last week")
    assert await env.contents() == ["I live in Lisbon", "I moved to Porto"]

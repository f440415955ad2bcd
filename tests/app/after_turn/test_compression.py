"""Compression after a turn: the session's older messages folded into a summary, by the
model or, without one, as an extract."""

from __future__ import annotations

from contextd.core.editing.compaction import CompactionSettings
from contextd.store.models import StoredMessage

from tests.support.after_turn_env import Env, ScriptedProvider, run


async def test_compression_past_the_threshold_with_the_fallback(env: Env) -> None:
    # Each turn is 5 tokens under the byte estimate: three are 15, four are 20.
    runner = env.runner(compaction=by_tokens(17, keep_messages=2))
    sid = await env.session()
    stored: list[StoredMessage] = []
    for index in range(1, 4):  # 6 messages, 15 tokens: not over the trigger
        message, turn = await env.turn(sid, index, f"question {index}", f"answer {index}")
        stored.append(message)
        await run(runner, turn)
    assert await env.summaries.active_compression(sid) is None

    message, turn = await env.turn(sid, 4, "question 4", "answer 4")  # 8 messages, 20 tokens
    await run(runner, turn)
    first = await env.summaries.active_compression(sid)
    assert first is not None
    all_ids = tuple(m.id for m in (await env.conversation.list_messages(sid))[0])
    assert first.message_ids == all_ids[:6] and first.start_message_id == all_ids[0]
    assert first.summary.startswith("(extract, not a model summary: 6 earlier messages)")
    assert "- user: question 1" in first.summary and "- assistant: answer 3" in first.summary
    assert "question 4" not in first.summary

    for index in range(5, 8):  # uncovered: 4, 6, 8 messages; compressed again at 8
        _, turn = await env.turn(sid, index, f"question {index}", f"answer {index}")
        await run(runner, turn)
    second = await env.summaries.active_compression(sid)
    assert second is not None and second.id != first.id
    all_ids = tuple(m.id for m in (await env.conversation.list_messages(sid))[0])
    assert second.message_ids == all_ids[:12] and second.start_message_id == all_ids[0]
    assert "question 1" in second.summary  # the previous summary is folded in
    assert "question 6" in second.summary and "question 7" not in second.summary
    assert runner.stats.compressions == 2


async def test_compression_by_the_model(env: Env) -> None:
    provider = ScriptedProvider(compression="```\nEarlier: the user asked about 1-3.\n```")
    runner = env.runner(provider, compaction=by_tokens(12, keep_messages=2))
    sid = await env.session()
    for index in range(1, 4):
        _, turn = await env.turn(sid, index, f"question {index}", f"answer {index}")
    await run(runner, turn)
    active = await env.summaries.active_compression(sid)
    assert active is not None and active.summary == "Earlier: the user asked about 1-3."
    assert len(active.message_ids) == 4
    [prompt] = provider.prompts("compression")
    assert "question 1" in prompt and "answer 2" in prompt and "question 3" not in prompt
    # The session summary was written after it and saw it.
    [summary_prompt] = provider.prompts("summary")
    assert "Earlier: the user asked about 1-3." in summary_prompt


def by_tokens(trigger: int, **settings: object) -> CompactionSettings:
    """Compaction by a trigger in tokens only (the share of the budget off)."""
    return CompactionSettings(trigger_tokens=trigger, trigger_share=0, **settings)  # type: ignore[arg-type]

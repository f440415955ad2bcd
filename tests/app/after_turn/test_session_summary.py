"""The session summary after a turn: an extract without a model, the model's cleaned
summary with one, and a summary the host set kept."""

from __future__ import annotations

from contextd.app.chat.interrupted import InterruptedTurns
from contextd.app.chat.session_lease import SessionTurns
from contextd.app.scope import Caller
from contextd.app.sessions import SessionsApp
from contextd.core.tokens import TokenizerRegistry
from contextd.store.partial_answers import PartialAnswerRepo

from tests.support.after_turn_env import USER, Env, ScriptedProvider, run


async def test_echo_session_summary_is_an_extract(env: Env) -> None:
    runner = env.runner()
    sid = await env.session()
    _, first = await env.turn(sid, 1, "我想学做红烧肉", "echo: 好的")
    await run(runner, first)
    assert (
        await env.session_summary(sid)
        == "（摘录，未经模型总结）开始：「我想学做红烧肉」 → 「echo: 好的」"
    )
    _, second = await env.turn(sid, 2, "需要多久？", "大约一个小时")
    await run(runner, second)
    summary = await env.session_summary(sid)
    assert summary == (
        "（摘录，未经模型总结）开始：「我想学做红烧肉」；最近：「需要多久？」 → 「大约一个小时」"
    )
    # The recent_sessions layer of the user's other sessions reads it.
    other = await env.session()
    [recent] = await env.summaries.recent_session_summaries(USER, other)
    assert recent.session_id == sid and recent.summary == summary


async def test_a_summary_the_host_set_is_kept_after_later_turns(env: Env) -> None:
    runner = env.runner()
    sid = await env.session()
    _, first = await env.turn(sid, 1, "Plan the budget", "echo: ok")
    await run(runner, first)
    assert "Plan the budget" in await env.session_summary(sid)  # automatic so far
    events = env.store.event_log()
    tokenizers = TokenizerRegistry()
    partials = PartialAnswerRepo(env.db, lease_seconds=15.0)
    turns = SessionTurns(partials, InterruptedTurns(partials, env.conversation, events, tokenizers))
    app = SessionsApp(
        env.sessions,
        env.conversation,
        env.summaries,
        env.memories,
        tokenizers,
        events,
        turns,
        "echo",
    )
    await app.set_session_summary(Caller(USER), sid, "Q3 budget plan")  # SetSessionSummary
    await events.aclose()
    _, second = await env.turn(sid, 2, "Add travel costs", "echo: added")
    await run(runner, second)
    assert await env.session_summary(sid) == "Q3 budget plan"
    assert runner.stats.session_summaries == 1  # the second turn's was not written


async def test_model_session_summary_is_cleaned_and_sees_the_session(env: Env) -> None:
    provider = ScriptedProvider(summary="```\nUser plans a trip to Japan.\n\n\nOpen: dates.\n```")
    runner = env.runner(provider)
    sid = await env.session()
    await env.turn(sid, 1, "Help me plan a trip to Japan")
    _, turn = await env.turn(sid, 2, "What about April?", "April is cherry blossom season.")
    await run(runner, turn)
    assert await env.session_summary(sid) == "User plans a trip to Japan.\nOpen: dates."
    [prompt] = provider.prompts("summary")
    assert "Help me plan a trip to Japan" in prompt and "cherry blossom" in prompt

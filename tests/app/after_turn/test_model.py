"""After-turn model calls: recorded as a turn's are (the GenAI metrics get each call, with
its tokens, and a failed or overlong call with its error type), and one way to fail for
every job: logged, counted, and the job's rule-based result used instead."""

from __future__ import annotations

import asyncio
import logging

import pytest
from contextd.app.after_turn.model import MAX_MODEL_OUTPUT_CHARS, AfterTurnModel
from contextd.core.editing.compaction import CompactionSettings
from contextd.core.messages import ChatMessage, Role
from contextd.metrics.recorder import Recorder
from contextd.providers.echo import EchoProvider
from contextd.providers.errors import ProviderUnavailable

from tests.support.after_turn_env import Env, ScriptedProvider, after_turn_records, run

MESSAGES = [ChatMessage(role=Role.USER, content="Extract the facts: I like jazz.")]


class Calls(Recorder):
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, int, int]] = []

    def model_call(
        self,
        system: str,
        model: str,
        seconds: float,
        error_type: str,
        input_tokens: int,
        output_tokens: int,
    ) -> None:
        assert seconds >= 0
        self.calls.append((system, model, error_type, input_tokens, output_tokens))


async def test_a_call_is_recorded_with_its_tokens() -> None:
    recorder = Calls()
    model = AfterTurnModel(EchoProvider(), timeout=5, max_output_tokens=100, metrics=recorder)
    text = await model.complete(MESSAGES)
    assert "jazz" in text
    [(system, name, error_type, _, output_tokens)] = recorder.calls
    assert (system, name, error_type) == ("echo", "echo", "")
    assert output_tokens == len(text.split())


async def test_an_overlong_answer_is_recorded_as_failed() -> None:
    recorder = Calls()
    model = AfterTurnModel(EchoProvider(), timeout=5, max_output_tokens=100, metrics=recorder)
    long_text = "word " * (MAX_MODEL_OUTPUT_CHARS // 4)
    with pytest.raises(ValueError, match="more than"):
        await model.complete([ChatMessage(role=Role.USER, content=long_text)])
    [(_, _, error_type, _, _)] = recorder.calls
    assert error_type == "ValueError"


async def test_a_failing_provider_is_logged_and_never_raised(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    error = ProviderUnavailable("fake", "down")
    provider = ScriptedProvider(facts=error, summary=error, compression=error)
    compaction = CompactionSettings(trigger_tokens=5, trigger_share=0, keep_messages=1)
    runner = env.runner(provider, compaction=compaction)
    sid = await env.session()
    await env.turn(sid, 1, "first question")
    _, turn = await env.turn(sid, 2, "I like jazz")
    with caplog.at_level(logging.WARNING, "contextd.after_turn"):
        await run(runner, turn)
    # Everything fell back, nothing was raised, each fallback was logged.
    assert await env.contents() == ["I like jazz"]
    summary = await env.session_summary(sid)
    assert summary is not None and summary.startswith("(extract, not a model summary)")
    compression = await env.summaries.active_compression(sid)
    assert compression is not None and compression.summary.startswith("(extract")
    assert runner.stats.model_fallbacks == 3
    assert len(after_turn_records(caplog, logging.WARNING)) == 3


async def test_model_calls_time_out(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    provider = ScriptedProvider(gate=asyncio.Event())  # never answers
    runner = env.runner(provider, model_timeout=0.05)
    sid = await env.session()
    _, turn = await env.turn(sid, 1, "I like tea")
    await asyncio.wait_for(run(runner, turn), 5)
    assert await env.contents() == ["I like tea"]  # the rule fallback
    assert runner.stats.model_fallbacks == 2  # facts and the session summary

"""After-turn model calls are recorded as a turn's are: the GenAI metrics get each call,
with its tokens, and a failed or overlong call with its error type."""

from __future__ import annotations

import pytest
from contextd.app.after_turn_model import MAX_MODEL_OUTPUT_CHARS, AfterTurnModel
from contextd.core.messages import ChatMessage, Role
from contextd.metrics.recorder import Recorder
from contextd.providers.echo import EchoProvider

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

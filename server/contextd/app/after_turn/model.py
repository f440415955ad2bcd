"""The model calls of after-turn work (memory extraction, summaries): text only, within
a time limit and a size limit, each with the span and the metrics of a turn's model
calls; and what every job does with one: ask the model when it is used, and fall back to
its rule-based result when the model is not, or when its call or its answer fails."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from opentelemetry.trace import Span

from contextd.app.after_turn.work import (
    AfterTurnSettings,
    AfterTurnStats,
    FinishedTurn,
    ids,
    log,
)
from contextd.core.messages import ChatMessage
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.providers.base import Finished, ModelRequest, Provider, TextDelta, Usage
from contextd.store.conversation import ConversationRepo
from contextd.store.summaries import SummaryRepo
from contextd.tracing import genai

# A model answer is read up to this many characters; past them the call is stopped.
MAX_MODEL_OUTPUT_CHARS = 20_000

T = TypeVar("T")


class AfterTurnModel:
    """The provider, as after-turn work calls it."""

    def __init__(
        self,
        provider: Provider,
        timeout: float,
        max_output_tokens: int,
        metrics: Recorder = NULL_RECORDER,
    ) -> None:
        self.provider = provider
        self.timeout = timeout
        self.max_output_tokens = max_output_tokens
        self.metrics = metrics
        # Where the calls go, for their spans (none for a provider in the process).
        self._model_server = genai.ModelServer.of(getattr(provider, "base_url", ""))

    async def complete(
        self, messages: list[ChatMessage], model: str = "", seconds: float | None = None
    ) -> str:
        """One model call's text (tool calls are not offered), within ``seconds`` (None:
        the after-turn work's ``timeout``), by ``model`` ("": the provider's); its span and its
        metrics are those of a turn's model calls."""
        request = ModelRequest(
            messages=messages,
            model=model,
            temperature=0.0,
            max_output_tokens=self.max_output_tokens,
        )
        model = model or self.provider.default_model
        answer = _Answer()
        started = time.perf_counter()
        failure: BaseException | None = None
        with genai.model_call(
            self.provider.name,
            model,
            self._model_server,
            max_tokens=request.max_output_tokens,
            temperature=request.temperature,
            messages=messages,
        ) as span:
            try:
                async with asyncio.timeout(self.timeout if seconds is None else seconds):
                    async with contextlib.aclosing(self.provider.stream(request)) as stream:
                        async for event in stream:
                            answer.take(event)
            except BaseException as error:
                failure = error
                raise
            finally:
                error_type = genai.error_type(failure)
                if span is not None:
                    answer.ended(span, error_type)
                self.metrics.model_call(
                    self.provider.name,
                    model,
                    time.perf_counter() - started,
                    error_type,
                    answer.usage.prompt_tokens,
                    answer.usage.completion_tokens,
                )
        return answer.text


class ModelOrRules:
    """The model as after-turn jobs ask it: only when it is ``used`` (else each job goes
    by its rules), and with one way to fail, the same for every job (``ask``)."""

    def __init__(self, model: AfterTurnModel, used: bool, stats: AfterTurnStats) -> None:
        self._model = model
        self.used = used
        self._stats = stats

    @property
    def name(self) -> str:
        """The model's name, for the records of what it wrote."""
        return self._model.provider.default_model

    async def ask(
        self,
        turn: FinishedTurn,
        messages: list[ChatMessage],
        read: Callable[[str], T],
        failure: str,
        *,
        model: str = "",
        seconds: float | None = None,
    ) -> T | None:
        """The model's answer to ``messages`` as ``read`` makes it out, or None when the
        call or the reading failed (or took over ``seconds``): then ``failure`` is logged
        as a warning with the error, the fallback is counted, and the caller uses its
        rule-based result. ``model``: another than the provider's."""
        try:
            return read(await self._model.complete(messages, model, seconds))
        except Exception as error:
            self._stats.model_fell_back()
            log.warning(failure, extra={**ids(turn), "error": f"{type(error).__name__}: {error}"})
            return None


@dataclass(frozen=True, slots=True)
class SummaryJob:
    """An after-turn job that writes a summary (a compression of older messages, the
    session's summary) from the conversation, with the model or by its rules."""

    _conversation: ConversationRepo
    _summaries: SummaryRepo
    _model: ModelOrRules
    _settings: AfterTurnSettings
    _stats: AfterTurnStats


@dataclass
class _Answer:
    """What one after-turn model call answered, as its events came."""

    parts: list[str] = field(default_factory=list)
    size: int = 0
    usage: Usage = field(default_factory=lambda: Usage(0, 0))
    finished: Finished | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def take(self, event: object) -> None:
        if isinstance(event, TextDelta):
            self.parts.append(event.text)
            self.size += len(event.text)
            if self.size > MAX_MODEL_OUTPUT_CHARS:
                raise ValueError(f"the model wrote more than {MAX_MODEL_OUTPUT_CHARS} characters")
        elif isinstance(event, Usage):
            self.usage = event
        elif isinstance(event, Finished):
            self.finished = event

    def ended(self, span: Span, error_type: str) -> None:
        finished = self.finished
        genai.model_call_ended(
            span,
            finish_reason=finished.reason if finished is not None else "",
            response_id=finished.response_id if finished is not None else "",
            response_model=finished.response_model if finished is not None else "",
            input_tokens=self.usage.prompt_tokens,
            output_tokens=self.usage.completion_tokens,
            text=self.text,
            calls=(),
            error_type=error_type,
        )

"""The model calls of after-turn work (memory extraction, summaries): text only, within
a time limit and a size limit, each with the span and the metrics of a turn's model
calls."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from opentelemetry.trace import Span

from contextd.core.messages import ChatMessage
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.providers.base import Finished, ModelRequest, Provider, TextDelta, Usage
from contextd.tracing import genai

# A model answer is read up to this many characters; past them the call is stopped.
MAX_MODEL_OUTPUT_CHARS = 20_000


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

    async def complete(self, messages: list[ChatMessage]) -> str:
        """One model call's text (tool calls are not offered), within ``timeout``;
        its span and its metrics are those of a turn's model calls."""
        request = ModelRequest(
            messages=messages, temperature=0.0, max_output_tokens=self.max_output_tokens
        )
        model = self.provider.default_model
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
                async with asyncio.timeout(self.timeout):
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

"""A chat turn's step loop: model calls until an answer, a tool call the host runs, or
the step limit. Each step streams the model's text to the caller, and the tool protocol
(tool_protocol.py) reads what the step asks for: inline tools (memory search, recall)
are answered and the model called again."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import AsyncGenerator
from contextlib import AbstractContextManager

from opentelemetry.trace import Span

from contextd.app.chat.events import ChatEvent, DeltaEvent, ToolCallEvent, TurnStatus, UsageEvent
from contextd.app.chat.tool_protocol import FinalAnswer, HostAction, ToolProtocol, ToolUse
from contextd.app.chat.turn import Turn
from contextd.core.messages import ToolCall
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.providers.base import (
    Finished,
    ModelEvent,
    ModelRequest,
    Provider,
    TextDelta,
    ToolCallReady,
    Usage,
)
from contextd.providers.errors import ProviderError, ProviderRateLimited
from contextd.tracing import genai


class StepLoop:
    """Runs a turn's steps (``run``) against the model."""

    def __init__(
        self, provider: Provider, max_steps: int, metrics: Recorder = NULL_RECORDER
    ) -> None:
        self._provider = provider
        self._max_steps = max_steps
        self._metrics = metrics
        # Where the model calls go, for their spans (none for a provider in the process).
        self._model_server = genai.ModelServer.of(getattr(provider, "base_url", ""))

    async def run(
        self, tools: ToolProtocol[ToolUse], request: ModelRequest
    ) -> AsyncGenerator[ChatEvent, None]:
        """Model calls until an answer, a host tool call or the step limit; ``tools``
        reads what each step asks for."""
        turn, record = tools.turn, tools.record
        timed = False  # the first text delta of the call is timed
        while True:
            calls: list[ToolCall] = []
            # The model step, inline: a generator per step would be one more for every
            # text delta to pass.
            try:
                record.begin_step(request.prompt_tokens_estimate)
                step = turn.step
                started = time.perf_counter()
                failure: BaseException | None = None
                stream = self._provider.stream(request)
                with self._model_span(request) as span:
                    try:
                        async with contextlib.aclosing(stream):
                            async for model_event in stream:
                                if isinstance(model_event, TextDelta):
                                    if not timed:
                                        timed = True
                                        seconds = time.monotonic() - turn.started
                                        self._metrics.first_delta(seconds)
                                    turn.add_text(model_event.text)
                                    yield DeltaEvent(model_event.text, step)
                                else:
                                    event = _chat_event(turn, model_event, calls)
                                    if event is not None:
                                        yield event
                    except BaseException as error:
                        failure = error
                        raise
                    finally:
                        record.end_step(calls)
                        self._model_call_ended(turn, request, started, failure)
                        if span is not None:
                            _model_span_ended(span, turn, calls, failure)
            except ProviderError as error:
                yield await record.store_partial(TurnStatus.ERROR, _error_text(error))
                return
            tools.log.assistant(turn.step, turn.step_text, turn.usage.step)
            outcome = tools.read_step(turn.step_text, calls)
            if isinstance(outcome, FinalAnswer):
                yield await record.answer(outcome.text, outcome.final_text)
                return
            if isinstance(outcome, HostAction):
                for event in await tools.require_action(outcome):
                    yield event
                return
            if turn.steps_this_call >= self._max_steps:
                yield await tools.stop_at_step_limit(outcome)
                return
            answers = await tools.answer_inline(outcome)
            for event in answers.events:
                yield event
            turn.next_step()
            request = await tools.next_request(answers)

    def _model_span(self, request: ModelRequest) -> AbstractContextManager[Span | None]:
        return genai.model_call(
            self._provider.name,
            request.model or self._provider.default_model,
            self._model_server,
            max_tokens=request.max_output_tokens,
            temperature=request.temperature,
            messages=request.messages,
        )

    def _model_call_ended(
        self, turn: Turn, request: ModelRequest, started: float, failure: BaseException | None
    ) -> None:
        if not self._metrics.enabled:
            return
        usage = turn.usage.step
        self._metrics.model_call(
            self._provider.name,
            request.model or self._provider.default_model,
            time.perf_counter() - started,
            genai.error_type(failure),
            usage.prompt_tokens,
            usage.completion_tokens,
        )


def _chat_event(turn: Turn, event: ModelEvent, calls: list[ToolCall]) -> ChatEvent | None:
    """A model event other than text into the turn (tool calls into ``calls``); what the
    caller sees of it."""
    if isinstance(event, ToolCallReady):
        calls.append(event.call)
        return ToolCallEvent(event.call, turn.step)
    if isinstance(event, Usage):
        return UsageEvent(turn.take_usage(event, calls), turn.step)
    if isinstance(event, Finished):
        turn.finish_step(event)
    return None


def _model_span_ended(
    span: Span, turn: Turn, calls: list[ToolCall], failure: BaseException | None
) -> None:
    finish = turn.step_finish
    usage = turn.usage.step
    genai.model_call_ended(
        span,
        finish_reason=finish.reason if finish is not None else "",
        response_id=finish.response_id if finish is not None else "",
        response_model=finish.response_model if finish is not None else "",
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        text=turn.step_text,
        calls=calls,
        error_type=genai.error_type(failure),
    )


def _error_text(error: ProviderError) -> str:
    """The provider's error for the host, with the wait it asked for when it said."""
    text = str(error)
    if isinstance(error, ProviderRateLimited) and error.retry_after is not None:
        text += f"; retry after {math.ceil(error.retry_after)} s"
    return text

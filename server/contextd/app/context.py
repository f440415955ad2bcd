"""Use cases of ContextService: the entry point any transport calls.

A transport reads BuildMessages into one of two commands, each in the domain's terms
and checked field by field: core's ``BuildRequest`` when the history is in the request
(``build`` here), a ``SessionBuildRequest`` when it is a stored session's (handed to
``session_builds``, app/session_context.py, which owns that build whole). Both answer
a ``BuiltContext``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextd.app.offload import Offload
from contextd.app.session_build_request import BuiltContext
from contextd.app.session_context import SessionContextBuilder
from contextd.core.build import build_messages
from contextd.core.build_request import BuildRequest
from contextd.core.content import ImageLimits
from contextd.core.editing import EditingSettings
from contextd.core.editing.settings import OFF as EDITING_OFF
from contextd.core.errors import InvalidArgument
from contextd.core.messages import ChatMessage
from contextd.core.prompt import LayerReport, PromptLayers, assemble_system_prompt, report_layers
from contextd.core.tokens import Tokenizer, TokenizerInfo, TokenizerRegistry, message_tokens
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.tracing import spans


@dataclass(frozen=True, slots=True)
class AssembledPrompt:
    system_prompt: str
    layers: list[LayerReport]
    tokens: int
    tokenizer: str


@dataclass(frozen=True, slots=True)
class TokenCounts:
    tokenizer: str
    text_tokens: list[int]
    message_tokens: list[int]

    @property
    def total(self) -> int:
        return sum(self.text_tokens) + sum(self.message_tokens)


class ContextApp:
    def __init__(
        self,
        tokenizers: TokenizerRegistry,
        max_history_messages: int,
        sessions: SessionContextBuilder,
        image_limits: ImageLimits | None = None,
        metrics: Recorder = NULL_RECORDER,
        editing: EditingSettings = EDITING_OFF,
    ) -> None:
        self.metrics = metrics
        # The server's editing defaults, which a request's fields override.
        self.editing = editing
        self.tokenizers = tokenizers
        self.image_limits = image_limits or ImageLimits()
        self.max_history_messages = max_history_messages
        self.session_builds = sessions
        self._offload = Offload()

    async def assemble_prompt(self, layers: PromptLayers, tokenizer: str) -> AssembledPrompt:
        with spans.span("contextd.assemble_prompt"):
            text = assemble_system_prompt(layers)
            tok = self.tokenizers.get(tokenizer)
            return await self._offload.run_if(2 * len(text), _assembled, text, layers, tok)

    async def build(self, request: BuildRequest) -> BuiltContext:
        """BuildMessages with the history in the request."""
        with spans.span("contextd.build_messages"):
            if len(request.history) > self.max_history_messages:
                raise InvalidArgument.one(
                    "history", f"at most {self.max_history_messages} messages per request"
                )
            chars = sum(len(m.content) for m in request.history) + len(request.user_message)
            result = await self._offload.run_if(chars, build_messages, request)
        return self._recorded(BuiltContext(result, []))

    def _recorded(self, built: BuiltContext) -> BuiltContext:
        if self.metrics.enabled:
            report = built.result.report
            self.metrics.built(report.total_tokens, report.dropped)
        return built

    async def count_tokens(
        self, tokenizer: str, texts: Sequence[str], messages: Sequence[ChatMessage]
    ) -> TokenCounts:
        tok = self.tokenizers.get(tokenizer)
        chars = sum(map(len, texts)) + sum(len(m.content) for m in messages)
        return await self._offload.run_if(chars, _counted, tok, texts, messages)

    def list_tokenizers(self) -> tuple[list[TokenizerInfo], str]:
        return self.tokenizers.describe(), self.tokenizers.default


def _assembled(text: str, layers: PromptLayers, tok: Tokenizer) -> AssembledPrompt:
    return AssembledPrompt(text, report_layers(layers, tok), tok.count(text), tok.name)


def _counted(tok: Tokenizer, texts: Sequence[str], messages: Sequence[ChatMessage]) -> TokenCounts:
    return TokenCounts(
        tok.name, [tok.count(t) for t in texts], [message_tokens(m, tok) for m in messages]
    )

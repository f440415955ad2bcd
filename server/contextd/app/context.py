"""Use cases of ContextService: the entry point any transport calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from contextd.app.offload import Offload
from contextd.app.session_context import SessionBuild, SessionBuildRequest, SessionContextBuilder
from contextd.core.build import BuildRequest, BuildResult, build_messages, validate_build_request
from contextd.core.content import ContentPart, ImageLimits
from contextd.core.errors import ContextdError, FieldViolation, InvalidArgument, Violations
from contextd.core.inline_request import InlineRequest, chat_messages, user_message_parts
from contextd.core.messages import ChatMessage
from contextd.core.plain_build import PlainResult, fit_plain, plain_texts
from contextd.core.prompt import LayerReport, PromptLayers, assemble_system_prompt, report_layers
from contextd.core.tokens import (
    EstimateTokenizer,
    Tokenizer,
    TokenizerInfo,
    TokenizerRegistry,
    message_tokens,
)
from contextd.metrics.recorder import NULL_RECORDER, Recorder
from contextd.tracing import spans


@dataclass(frozen=True, slots=True)
class SessionModeRequest:
    """BuildMessages in session mode (from the stored conversation), as the transport
    read it."""

    tokenizer: str
    # Inline-mode fields the request set; session mode takes all of that from the store.
    inline_fields: Sequence[str]
    violations: Sequence[FieldViolation]  # as in InlineRequest
    # The request, given the tokenizer once it is resolved and the image limits; bad
    # user message parts are recorded in the violations given.
    request: Callable[[Tokenizer, ImageLimits, Violations], SessionBuildRequest]


# What BuildMessages answers, by the way it was built.
BuiltMessages: TypeAlias = PlainResult | BuildResult | SessionBuild


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
    ) -> None:
        self.metrics = metrics
        self.tokenizers = tokenizers
        self.image_limits = image_limits or ImageLimits()
        self.max_history_messages = max_history_messages
        self._sessions = sessions
        self._offload = Offload()

    def tokenizer(self, name: str) -> Tokenizer:
        return self.tokenizers.get(name)

    def tokenizer_or_placeholder(self, name: str, violations: Violations) -> Tokenizer:
        """The named tokenizer; for an unknown name, record it and go on with a stand-in
        so that the rest of the request can still be checked."""
        try:
            return self.tokenizers.get(name)
        except InvalidArgument as error:
            violations.extend(error.violations)
            return EstimateTokenizer()

    async def assemble_prompt(self, layers: PromptLayers, tokenizer: str) -> AssembledPrompt:
        with spans.span("contextd.assemble_prompt"):
            text = assemble_system_prompt(layers)
            tok = self.tokenizers.get(tokenizer)
            return await self._offload.run_if(2 * len(text), _assembled, text, layers, tok)

    async def build(self, request: InlineRequest | SessionModeRequest) -> BuiltMessages:
        """BuildMessages, the one place that picks the way: from the stored session, the
        plain shortcut when the request is that case, or the general build."""
        with spans.span("contextd.build_messages"):
            built = await self._build(request)
        if self.metrics.enabled:
            report = built.result.report if isinstance(built, SessionBuild) else built.report
            self.metrics.built(report.total_tokens, report.dropped)
        return built

    async def _build(self, request: InlineRequest | SessionModeRequest) -> BuiltMessages:
        if isinstance(request, SessionModeRequest):
            return await self._build_for_session(request)
        plain = await self._build_plain(request)
        if plain is not None:
            return plain
        build = self._general_request(request)
        chars = sum(len(m.content) for m in build.history) + len(build.user_message)
        return await self._offload.run_if(chars, build_messages, build)

    async def _build_plain(self, request: InlineRequest) -> PlainResult | None:
        """The common case's shortcut; None when the request is not that case."""
        if len(request.history) > self.max_history_messages:
            return None
        try:
            tokenizer = self.tokenizers.get(request.tokenizer)
        except ContextdError:
            return None  # the general way reports it
        texts = plain_texts(request)
        if texts is None:
            return None
        chars = sum(map(len, texts)) + len(request.user_message)
        return await self._offload.run_if(chars, fit_plain, request, texts, tokenizer)

    def _general_request(self, request: InlineRequest) -> BuildRequest:
        """The request of the general build, checked in full (every bad field named)."""
        violations = Violations()
        tokenizer = self.tokenizer_or_placeholder(request.tokenizer, violations)
        violations.extend(request.violations)
        read_parts = request.read_parts or _no_parts
        user_message, user_parts = user_message_parts(
            request.user_message,
            request.user_parts,
            "user_message_parts",
            violations,
            read_parts,
            self.image_limits,
        )
        build = BuildRequest(
            user_message=user_message,
            user_parts=user_parts,
            token_budget=request.token_budget,
            tokenizer=tokenizer,
            system_prompts=request.system_prompts,
            layers=request.layers,
            history=chat_messages(
                request.history,
                request.roles,
                "history",
                violations,
                read_parts,
                self.image_limits,
            ),
            compression_summary=request.compression_summary,
            output_format=request.output_format,
            overflow_policy=request.overflow_policy,
            cache_layout=request.cache_layout,
        )
        if violations:
            validate_build_request(build, violations)  # to name every other bad field too
            violations.raise_if_any()
        if len(build.history) > self.max_history_messages:
            raise InvalidArgument.one(
                "history", f"at most {self.max_history_messages} messages per request"
            )
        return build

    async def _build_for_session(self, request: SessionModeRequest) -> SessionBuild:
        violations = Violations()
        for name in request.inline_fields:
            violations.add(name, "must be empty in session mode")
        tokenizer = self.tokenizer_or_placeholder(request.tokenizer, violations)
        violations.extend(request.violations)
        build = request.request(tokenizer, self.image_limits, violations)
        violations.raise_if_any()
        return await self._sessions.build(build)

    async def count_tokens(
        self, tokenizer: str, texts: Sequence[str], messages: Sequence[ChatMessage]
    ) -> TokenCounts:
        tok = self.tokenizers.get(tokenizer)
        chars = sum(map(len, texts)) + sum(len(m.content) for m in messages)
        return await self._offload.run_if(chars, _counted, tok, texts, messages)

    def list_tokenizers(self) -> tuple[list[TokenizerInfo], str]:
        return self.tokenizers.describe(), self.tokenizers.default


def _no_parts(
    parts: Sequence[object], at: str, limits: ImageLimits, violations: Violations
) -> tuple[ContentPart, ...]:
    # A transport that cannot carry parts gives none; none read means none given.
    violations.add(at, "this transport does not carry content parts")
    return ()


def _assembled(text: str, layers: PromptLayers, tok: Tokenizer) -> AssembledPrompt:
    return AssembledPrompt(text, report_layers(layers, tok), tok.count(text), tok.name)


def _counted(tok: Tokenizer, texts: Sequence[str], messages: Sequence[ChatMessage]) -> TokenCounts:
    return TokenCounts(
        tok.name, [tok.count(t) for t in texts], [message_tokens(m, tok) for m in messages]
    )

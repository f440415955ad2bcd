"""Use cases of ContextService: the entry point any transport calls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from contextd.core.build import BuildRequest, BuildResult, build_messages, validate_build_request
from contextd.core.errors import InvalidArgument, Violations
from contextd.core.messages import ChatMessage
from contextd.core.plain_build import PlainRequest, PlainResult, build_plain
from contextd.core.prompt import LayerReport, PromptLayers, assemble_system_prompt, report_layers
from contextd.core.tokens import (
    EstimateTokenizer,
    Tokenizer,
    TokenizerInfo,
    TokenizerRegistry,
    message_tokens,
)


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
    def __init__(self, tokenizers: TokenizerRegistry, max_history_messages: int) -> None:
        self.tokenizers = tokenizers
        self.max_history_messages = max_history_messages

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

    def reject(self, request: BuildRequest, violations: Violations) -> NoReturn:
        """Raise InvalidArgument with ``violations`` and every other bad field of ``request``."""
        validate_build_request(request, violations)
        violations.raise_if_any()
        raise AssertionError("reject() called without violations")

    def assemble_prompt(self, layers: PromptLayers, tokenizer: str) -> AssembledPrompt:
        text = assemble_system_prompt(layers)
        tok = self.tokenizers.get(tokenizer)
        return AssembledPrompt(text, report_layers(layers, tok), tok.count(text), tok.name)

    def build_messages(self, request: BuildRequest) -> BuildResult:
        if len(request.history) > self.max_history_messages:
            raise InvalidArgument.one(
                "history", f"at most {self.max_history_messages} messages per request"
            )
        return build_messages(request)

    def build_plain(self, request: PlainRequest) -> PlainResult | None:
        """The common case's shortcut; None means: call ``build_messages``."""
        if len(request.history) > self.max_history_messages:
            return None
        return build_plain(request)

    def count_tokens(
        self, tokenizer: str, texts: Sequence[str], messages: Sequence[ChatMessage]
    ) -> TokenCounts:
        tok = self.tokenizers.get(tokenizer)
        return TokenCounts(
            tok.name, [tok.count(t) for t in texts], [message_tokens(m, tok) for m in messages]
        )

    def list_tokenizers(self) -> tuple[list[TokenizerInfo], str]:
        return self.tokenizers.describe(), self.tokenizers.default

"""The synchronous client."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeAlias

import grpc

from . import _convert as convert
from ._convert import MessageLike, OutputFormat, OverflowPolicy
from ._errors import ContextdError
from ._pb import context_pb2_grpc as pb_grpc
from ._types import AssembledPrompt, BuildResult, TokenCount, TokenizerList

DEFAULT_TARGET = "127.0.0.1:50151"

MetadataValue: TypeAlias = str | bytes
Metadata: TypeAlias = Mapping[str, MetadataValue] | Sequence[tuple[str, MetadataValue]]
CallMetadata: TypeAlias = tuple[tuple[str, MetadataValue], ...]


def call_metadata(metadata: Metadata | None) -> CallMetadata | None:
    """Metadata sent with every call, as the tuple of pairs grpc expects."""
    if metadata is None:
        return None
    pairs = metadata.items() if isinstance(metadata, Mapping) else metadata
    return tuple((key, value) for key, value in pairs)


class ContextClient:
    """Synchronous client of contextd.v1.ContextService.

    Connects to ``target`` over an insecure channel that :meth:`close` closes, or
    uses ``channel`` as given (``target`` is then ignored and the caller closes the
    channel). ``timeout`` is the deadline of each call in seconds (``None``: none);
    ``metadata`` is sent with every call. Every failed call raises
    :class:`ContextdError`.
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        timeout: float | None = 30.0,
        channel: grpc.Channel | None = None,
        metadata: Metadata | None = None,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.metadata = call_metadata(metadata)
        self._owns_channel = channel is None
        self._channel: grpc.Channel = grpc.insecure_channel(target) if channel is None else channel
        self._closed = False
        #: The generated ContextServiceStub, for calls the helpers do not cover.
        self.stub = pb_grpc.ContextServiceStub(self._channel)

    @property
    def channel(self) -> grpc.Channel:
        return self._channel

    def close(self) -> None:
        """Close the channel if this client opened it; a channel passed in stays open."""
        if self._owns_channel and not self._closed:
            self._channel.close()
        self._closed = True

    def __enter__(self) -> ContextClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ContextClient({self.target!r}, timeout={self.timeout!r})"

    def _call(self, method: Callable[..., Any], request: Any) -> Any:
        try:
            return method(request, timeout=self.timeout, metadata=self.metadata)
        except grpc.RpcError as error:
            raise ContextdError.from_rpc_error(error) from error

    def assemble_prompt(
        self,
        identity: str,
        rules: str = "",
        skill: str = "",
        mode: str = "",
        memory: str = "",
        context: str = "",
        *,
        tokenizer: str = "",
    ) -> AssembledPrompt:
        """Join the six layers in order, skipping blank ones, and count their tokens."""
        request = convert.assemble_prompt_request(
            identity, rules, skill, mode, memory, context, tokenizer
        )
        return convert.assembled_prompt(self._call(self.stub.AssemblePrompt, request))

    def build_messages(
        self,
        user_message: str,
        *,
        token_budget: int,
        system_prompt: str | Sequence[str] | None = None,
        layers: Mapping[str, str] | None = None,
        history: Sequence[MessageLike] = (),
        compression_summary: Mapping[str, Any] | None = None,
        tokenizer: str = "",
        output_format: OutputFormat = "neutral",
        on_overflow: OverflowPolicy = "keep",
    ) -> BuildResult:
        """Build [system, ...history, user] under ``token_budget`` tokens.

        Give the system prompt either as ``system_prompt`` (one text or several,
        joined by a newline) or as ``layers`` (``{"identity": ..., "rules": ...}``).
        ``history`` holds message dicts, oldest first. ``on_overflow="fail"`` makes
        the call fail with FAILED_PRECONDITION when the system prompt and the user
        message alone exceed the budget.
        """
        request = convert.build_messages_request(
            user_message,
            token_budget=token_budget,
            system_prompt=system_prompt,
            layers=layers,
            history=history,
            compression_summary=compression_summary,
            tokenizer=tokenizer,
            output_format=output_format,
            on_overflow=on_overflow,
        )
        return convert.build_result(self._call(self.stub.BuildMessages, request))

    def count_tokens(
        self,
        texts: str | Sequence[str] = (),
        messages: Sequence[MessageLike] = (),
        *,
        tokenizer: str = "",
    ) -> TokenCount:
        """Count tokens of texts and of message dicts (with per-message overhead)."""
        request = convert.count_tokens_request(texts, messages, tokenizer)
        return convert.token_count(self._call(self.stub.CountTokens, request))

    def list_tokenizers(self) -> TokenizerList:
        """The tokenizers the server knows, whether each is available, and the default."""
        request = convert.list_tokenizers_request()
        return convert.tokenizer_list(self._call(self.stub.ListTokenizers, request))

"""The asyncio client, over grpc.aio."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

import grpc
import grpc.aio

from . import _convert as convert
from ._client import DEFAULT_TARGET, Metadata, call_metadata
from ._convert import MessageLike, OutputFormat, OverflowPolicy
from ._errors import ContextdError
from ._pb import context_pb2_grpc as pb_grpc
from ._types import AssembledPrompt, BuildResult, TokenCount, TokenizerList


class AsyncContextClient:
    """Asyncio client of contextd.v1.ContextService; the same methods as ContextClient.

    Connects to ``target`` over an insecure ``grpc.aio`` channel that :meth:`close`
    closes, or uses ``channel`` as given (``target`` is then ignored and the caller
    closes the channel). ``timeout`` is the deadline of each call in seconds
    (``None``: none); ``metadata`` is sent with every call. Every failed call
    raises :class:`ContextdError`.
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        timeout: float | None = 30.0,
        channel: grpc.aio.Channel | None = None,
        metadata: Metadata | None = None,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.metadata = call_metadata(metadata)
        self._owns_channel = channel is None
        self._channel: grpc.aio.Channel = (
            grpc.aio.insecure_channel(target) if channel is None else channel
        )
        self._closed = False
        #: The generated ContextServiceStub; its methods return awaitable calls.
        self.stub = pb_grpc.ContextServiceStub(self._channel)

    @property
    def channel(self) -> grpc.aio.Channel:
        return self._channel

    async def close(self) -> None:
        """Close the channel if this client opened it; a channel passed in stays open."""
        if self._owns_channel and not self._closed:
            await self._channel.close(None)
        self._closed = True

    async def __aenter__(self) -> AsyncContextClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncContextClient({self.target!r}, timeout={self.timeout!r})"

    async def _call(self, method: Callable[..., Any], request: Any) -> Any:
        try:
            return await method(request, timeout=self.timeout, metadata=self.metadata)
        except grpc.RpcError as error:
            raise ContextdError.from_rpc_error(error) from error

    async def assemble_prompt(
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
        return convert.assembled_prompt(await self._call(self.stub.AssemblePrompt, request))

    async def build_messages(
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

        See :meth:`ContextClient.build_messages`.
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
        return convert.build_result(await self._call(self.stub.BuildMessages, request))

    async def count_tokens(
        self,
        texts: str | Sequence[str] = (),
        messages: Sequence[MessageLike] = (),
        *,
        tokenizer: str = "",
    ) -> TokenCount:
        """Count tokens of texts and of message dicts (with per-message overhead)."""
        request = convert.count_tokens_request(texts, messages, tokenizer)
        return convert.token_count(await self._call(self.stub.CountTokens, request))

    async def list_tokenizers(self) -> TokenizerList:
        """The tokenizers the server knows, whether each is available, and the default."""
        request = convert.list_tokenizers_request()
        return convert.tokenizer_list(await self._call(self.stub.ListTokenizers, request))

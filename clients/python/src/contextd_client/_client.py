"""The synchronous client."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import EllipsisType, TracebackType
from typing import Any, TypeAlias

import grpc

from . import _convert as convert
from ._chat import ChatStream
from ._convert import MessageLike, OutputFormat, OverflowPolicy, ToolLike, ToolResultLike
from ._errors import ContextdError
from ._pb import chat_pb2_grpc, sessions_pb2_grpc
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
    """Synchronous client of contextd: ContextService, chat turns and session helpers.

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
        #: The generated ChatServiceStub and SessionServiceStub, on the same channel.
        self.chat_stub = chat_pb2_grpc.ChatServiceStub(self._channel)
        self.session_stub = sessions_pb2_grpc.SessionServiceStub(self._channel)

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

    def _timeout(self, timeout: float | EllipsisType | None) -> float | None:
        return self.timeout if isinstance(timeout, EllipsisType) else timeout

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

    # Chat ---------------------------------------------------------------------------

    def stream_chat(
        self,
        user_message: str,
        *,
        user_id: str,
        session_id: str = "",
        scenario: str = "",
        host: str = "",
        variables: Mapping[str, str] | None = None,
        memory: bool | None = None,
        messages: Sequence[MessageLike] = (),
        tools: Sequence[ToolLike] = (),
        tool_results: Sequence[ToolResultLike] = (),
        token_budget: int = 0,
        tokenizer: str = "",
        model: str | None = None,
        temperature: float | None = None,
        max_output_tokens: int | None = None,
        stop: Sequence[str] = (),
        refuse_over_limit: bool = False,
        title: str = "",
        timeout: float | EllipsisType | None = ...,
    ) -> ChatStream:
        """Run one chat turn; returns its events as they arrive (see :class:`ChatStream`).

        The events are TurnStarted, then TextDelta, ToolCallEvent and Usage as the model
        produces them, then TurnCompleted. ``session_id=""`` starts a new session (its
        id is ``TurnStarted.session_id``). ``timeout`` is the deadline of the whole turn
        in seconds; ``...`` means the client's timeout, ``None`` none. Requests the
        server refuses raise :class:`ContextdError` when the first event is read.
        """
        request = convert.stream_chat_request(
            user_message,
            user_id=user_id,
            session_id=session_id,
            scenario=scenario,
            host=host,
            variables=variables,
            memory=memory,
            messages=messages,
            tools=tools,
            tool_results=tool_results,
            token_budget=token_budget,
            tokenizer=tokenizer,
            model=model,
            temperature=temperature,
            max_output_tokens=max_output_tokens,
            stop=stop,
            refuse_over_limit=refuse_over_limit,
            title=title,
        )
        call = self.chat_stub.StreamChat(
            request, timeout=self._timeout(timeout), metadata=self.metadata
        )
        return ChatStream(call)

    # Sessions -----------------------------------------------------------------------

    def create_session(
        self,
        user_id: str,
        *,
        scenario: str = "",
        host: str = "",
        title: str = "",
        metadata: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Start a new, empty session of ``user_id``; returns it as a session dict."""
        request = convert.create_session_request(user_id, scenario, host, title, metadata)
        return convert.session_from_pb(self._call(self.session_stub.CreateSession, request).session)

    def get_session(self, user_id: str, session_id: str) -> dict[str, Any]:
        """A session of ``user_id`` as a dict (NOT_FOUND, or PERMISSION_DENIED if not theirs)."""
        request = convert.get_session_request(user_id, session_id)
        return convert.session_from_pb(self._call(self.session_stub.GetSession, request).session)

    def list_messages(
        self, user_id: str, session_id: str, *, page_size: int = 0
    ) -> list[dict[str, Any]]:
        """Every stored message of a session, oldest first, as dicts (all pages read)."""
        out: list[dict[str, Any]] = []
        token = ""
        while True:
            request = convert.list_messages_request(user_id, session_id, page_size, token)
            response = self._call(self.session_stub.ListMessages, request)
            out.extend(convert.session_message_from_pb(m) for m in response.messages)
            token = response.next_page_token
            if not token:
                return out

    def export_events(
        self, user_id: str, session_id: str, *, after: int = 0
    ) -> Iterator[dict[str, Any]]:
        """The session's event log, oldest first, one dict per event (skipping ``after``)."""
        request = convert.export_events_request(user_id, session_id, after)
        return self._export_events(request)

    def _export_events(self, request: Any) -> Iterator[dict[str, Any]]:
        call = self.session_stub.ExportEvents(request, timeout=self.timeout, metadata=self.metadata)
        try:
            for response in call:
                yield convert.event_from_json(response)
        except grpc.RpcError as error:
            raise ContextdError.from_rpc_error(error) from error
        finally:
            call.cancel()

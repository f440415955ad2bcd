"""The asyncio client, over grpc.aio, and the source of the sync client.

The two clients differ only in their transport (blocking or awaited calls), so the sync
one is not kept by hand: scripts/gen_sync_client.py writes _client.py from this module
with unasync, and `make lint` fails while that file is stale. Edit this module, then run
the script.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import datetime
from types import EllipsisType, TracebackType
from typing import Any

import grpc
import grpc.aio

from . import _chat_calls as chat_calls
from . import _context_calls as context_calls
from . import _memory_records as memory_records
from . import _records as records
from ._chat import AsyncChatStream
from ._context_calls import CacheLayout, OutputFormat, OverflowPolicy
from ._credentials import (
    AsyncTokenProvider,
    CallMetadata,
    async_token_pair,
    bearer,
    check_credentials,
    with_pair,
)
from ._errors import ContextdError
from ._messages import MessageLike
from ._options import DEFAULT_TARGET, Metadata, call_metadata
from ._pages import async_pages
from ._parts import PartLike
from ._pb import (
    chat_pb2_grpc,
    memory_pb2_grpc,
    prompts_pb2_grpc,
    sessions_pb2_grpc,
    users_pb2_grpc,
)
from ._pb import context_pb2_grpc as pb_grpc
from ._pb import prompts_pb2 as ppb
from ._pb import sessions_pb2 as spb
from ._record_types import (
    AddedMemory,
    Collected,
    DeletedCounts,
    Memory,
    MemoryChange,
    MemoryFilter,
    MemoryHits,
    Session,
    SessionEvent,
    Skill,
    StoredMessage,
    Template,
)
from ._retry import RetryPolicy, retry_delay
from ._trace import metadata_keys, trace_metadata, with_trace
from ._types import AssembledPrompt, BuildResult, TokenCount, TokenizerList


class AsyncContextClient:
    """Asyncio client of contextd; the same methods as ContextClient.

    Connects to ``target`` over a ``grpc.aio`` channel that :meth:`close` closes: a
    TLS channel with ``credentials`` (``grpc.ssl_channel_credentials(...)``), else an
    insecure one. Or uses ``channel`` as given (``target`` and ``credentials`` are
    then ignored and the caller closes the channel). ``timeout`` is the deadline of
    each call in seconds (``None``: none); ``metadata`` is sent with every call.
    Every failed call raises :class:`ContextdError`.

    Credentials: either ``api_key``, or ``token``, a callable returning the current
    token (or an awaitable of it, e.g. an ``async def``), called before every call;
    with ``token``, a :meth:`stream_chat` call starts when its first event is read.

    ``retries`` (a :class:`RetryPolicy`; default none) retries unary calls that fail
    with UNAVAILABLE; StreamChat and ExportEvents are never retried.

    ``propagate_trace`` (default on): see :class:`ContextClient`. A stream's trace context
    is the one current when :meth:`stream_chat` or :meth:`export_events` is called.
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        timeout: float | None = 30.0,
        channel: grpc.aio.Channel | None = None,
        metadata: Metadata | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        api_key: str | None = None,
        token: AsyncTokenProvider | None = None,
        retries: RetryPolicy | None = None,
        propagate_trace: bool = True,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.retries = retries
        self.metadata = call_metadata(metadata)
        self.propagate_trace = propagate_trace
        self._own_keys = metadata_keys(self.metadata)
        check_credentials(api_key, token, self.metadata, sync=False)
        self._key = None if api_key is None else bearer(api_key, "api_key")
        self._token = token
        self._owns_channel = channel is None
        self._channel: grpc.aio.Channel = (
            channel
            if channel is not None
            else grpc.aio.insecure_channel(target)
            if credentials is None
            else grpc.aio.secure_channel(target, credentials)
        )
        self._closed = False
        #: The generated ContextServiceStub, for calls the helpers do not cover.
        self.stub = pb_grpc.ContextServiceStub(self._channel)
        #: The generated stubs of the other services, on the same channel.
        self.chat_stub = chat_pb2_grpc.ChatServiceStub(self._channel)
        self.session_stub = sessions_pb2_grpc.SessionServiceStub(self._channel)
        self.memory_stub = memory_pb2_grpc.MemoryServiceStub(self._channel)
        self.prompt_stub = prompts_pb2_grpc.PromptServiceStub(self._channel)
        self.user_stub = users_pb2_grpc.UserServiceStub(self._channel)

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

    async def _metadata(self, trace: CallMetadata | None = None) -> CallMetadata | None:
        """``metadata`` with the credential and ``trace`` (default: the current trace
        context); a provider's token is asked for now."""
        pair = self._key if self._token is None else await async_token_pair(self._token)
        return with_trace(with_pair(self.metadata, pair), self._trace() if trace is None else trace)

    def _trace(self) -> CallMetadata:
        """The current trace context as metadata, when propagated."""
        return trace_metadata(self._own_keys) if self.propagate_trace else ()

    async def _call(self, method: Callable[..., Any], request: Any) -> Any:
        attempt = 1
        while True:
            metadata = await self._metadata()
            try:
                return await method(request, timeout=self.timeout, metadata=metadata)
            except grpc.RpcError as error:
                delay = retry_delay(self.retries, error, attempt)
                if delay is None:
                    raise ContextdError.from_rpc_error(error) from error
            await asyncio.sleep(delay)
            attempt += 1

    def _timeout(self, timeout: float | EllipsisType | None) -> float | None:
        return self.timeout if isinstance(timeout, EllipsisType) else timeout

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
        request = context_calls.assemble_prompt_request(
            identity, rules, skill, mode, memory, context, tokenizer
        )
        return context_calls.assembled_prompt(await self._call(self.stub.AssemblePrompt, request))

    async def build_messages(
        self,
        user_message: str | Sequence[PartLike],
        *,
        token_budget: int,
        system_prompt: str | Sequence[str] | None = None,
        layers: Mapping[str, str] | None = None,
        history: Sequence[MessageLike] = (),
        compression_summary: Mapping[str, Any] | None = None,
        tokenizer: str = "",
        output_format: OutputFormat = "neutral",
        on_overflow: OverflowPolicy = "keep",
        session: Mapping[str, Any] | None = None,
        cache_layout: CacheLayout | None = None,
        editing: Mapping[str, Any] | None = None,
    ) -> BuildResult:
        """Build [system, ...history, user] under ``token_budget`` tokens.

        See :meth:`ContextClient.build_messages`.
        """
        request = context_calls.build_messages_request(
            user_message,
            token_budget=token_budget,
            system_prompt=system_prompt,
            layers=layers,
            history=history,
            compression_summary=compression_summary,
            tokenizer=tokenizer,
            output_format=output_format,
            on_overflow=on_overflow,
            cache_layout=cache_layout,
            editing=editing,
        )
        if session is not None:
            request.session.CopyFrom(records.session_context_to_pb(session))
        return context_calls.build_result(await self._call(self.stub.BuildMessages, request))

    async def count_tokens(
        self,
        texts: str | Sequence[str] = (),
        messages: Sequence[MessageLike] = (),
        *,
        tokenizer: str = "",
    ) -> TokenCount:
        """Count tokens of texts and of message dicts (with per-message overhead)."""
        request = context_calls.count_tokens_request(texts, messages, tokenizer)
        return context_calls.token_count(await self._call(self.stub.CountTokens, request))

    async def list_tokenizers(self) -> TokenizerList:
        """The tokenizers the server knows, whether each is available, and the default."""
        request = context_calls.list_tokenizers_request()
        return context_calls.tokenizer_list(await self._call(self.stub.ListTokenizers, request))

    async def collect(
        self, user_id: str, message_id: str, *, remember: bool = False, uncollect: bool = False
    ) -> Collected:
        """Mark a stored assistant answer collected (``uncollect``: not), maybe remember it.

        Returns ``{"message_id", "is_collected", "memory_id"}``; ``memory_id`` is the
        memory holding the answer's text when ``remember`` is set, else "".
        """
        request = records.collect_request(user_id, message_id, remember, uncollect)
        return records.collected(await self._call(self.stub.Collect, request))

    # Chat ---------------------------------------------------------------------------

    @chat_calls.takes_arguments_of(chat_calls.chat_turn)
    def stream_chat(self, turn: chat_calls.ChatTurn) -> AsyncChatStream:
        """Run one chat turn; returns its events as an async iterator (no ``await``).

        See :meth:`ContextClient.stream_chat` and :class:`AsyncChatStream`.
        """
        request = turn.request
        deadline = self._timeout(turn.timeout)
        if self._token is not None:
            # The token may have to be awaited: the call starts at the first read.
            return AsyncChatStream(start=self._start_chat(request, deadline, self._trace()))
        metadata = with_trace(with_pair(self.metadata, self._key), self._trace())
        return AsyncChatStream(
            self.chat_stub.StreamChat(request, timeout=deadline, metadata=metadata)
        )

    async def _start_chat(
        self, request: Any, deadline: float | None, trace: CallMetadata
    ) -> grpc.aio.UnaryStreamCall[Any, Any]:
        metadata = await self._metadata(trace)
        call: grpc.aio.UnaryStreamCall[Any, Any] = self.chat_stub.StreamChat(
            request, timeout=deadline, metadata=metadata
        )
        return call

    # Sessions -----------------------------------------------------------------------

    async def create_session(
        self,
        user_id: str,
        *,
        scenario: str = "",
        host: str = "",
        title: str = "",
        metadata: Mapping[str, str] | None = None,
    ) -> Session:
        """Start a new, empty session of ``user_id``; returns it as a session dict."""
        request = records.create_session_request(user_id, scenario, host, title, metadata)
        response = await self._call(self.session_stub.CreateSession, request)
        return records.session_from_pb(response.session)

    async def get_session(self, user_id: str, session_id: str) -> Session:
        """A session of ``user_id`` as a dict (NOT_FOUND, or PERMISSION_DENIED if not theirs)."""
        request = records.get_session_request(user_id, session_id)
        response = await self._call(self.session_stub.GetSession, request)
        return records.session_from_pb(response.session)

    async def list_sessions(self, user_id: str, *, page_size: int = 0) -> list[Session]:
        """Every session of ``user_id``, most recently active first (all pages read)."""
        return [s async for s in self.iter_sessions(user_id, page_size=page_size)]

    def iter_sessions(self, user_id: str, *, page_size: int = 0) -> AsyncIterator[Session]:
        """:meth:`list_sessions` lazily, for ``async for`` (no ``await``)."""
        return async_pages(
            functools.partial(self._call, self.session_stub.ListSessions),
            lambda token: records.list_sessions_request(user_id, page_size, token),
            lambda response: map(records.session_from_pb, response.sessions),
        )

    async def delete_session(self, user_id: str, session_id: str) -> None:
        """Delete a session with its messages, summaries and event log; memories stay."""
        request = spb.DeleteSessionRequest(**records.session_ref(user_id, session_id))
        await self._call(self.session_stub.DeleteSession, request)

    async def append_messages(
        self,
        user_id: str,
        session_id: str,
        messages: Sequence[MessageLike],
        *,
        turn_index: int = 0,
    ) -> list[StoredMessage]:
        """Store messages at the end of a session, in one transaction; returns them stored."""
        request = records.append_messages_request(user_id, session_id, messages, turn_index)
        response = await self._call(self.session_stub.AppendMessages, request)
        return [records.session_message_from_pb(m) for m in response.messages]

    async def list_messages(
        self, user_id: str, session_id: str, *, page_size: int = 0
    ) -> list[StoredMessage]:
        """Every stored message of a session, oldest first, as dicts (all pages read)."""
        return [m async for m in self.iter_messages(user_id, session_id, page_size=page_size)]

    def iter_messages(
        self, user_id: str, session_id: str, *, page_size: int = 0
    ) -> AsyncIterator[StoredMessage]:
        """:meth:`list_messages` lazily, for ``async for`` (no ``await``)."""
        return async_pages(
            functools.partial(self._call, self.session_stub.ListMessages),
            lambda token: records.list_messages_request(user_id, session_id, page_size, token),
            lambda response: map(records.session_message_from_pb, response.messages),
        )

    async def add_compression_summary(
        self,
        user_id: str,
        session_id: str,
        message_ids: Sequence[str | int],
        summary: str,
        *,
        start_message_id: str | int | None = None,
    ) -> str:
        """Replace stored messages by a summary in later builds; returns the summary id.

        ``start_message_id`` defaults to the first of ``message_ids``. The new summary
        replaces the session's earlier active one.
        """
        request = records.compression_summary_request(
            user_id, session_id, message_ids, summary, start_message_id
        )
        response = await self._call(self.session_stub.AddCompressionSummary, request)
        return str(response.summary_id)

    async def set_session_summary(self, user_id: str, session_id: str, summary: str) -> None:
        """Set the short summary the user's other sessions see in their recent_sessions
        context layer."""
        request = records.session_summary_request(user_id, session_id, summary)
        await self._call(self.session_stub.SetSessionSummary, request)

    def export_events(
        self, user_id: str, session_id: str, *, after: int = 0
    ) -> AsyncIterator[SessionEvent]:
        """The session's event log as an async iterator of dicts (no ``await``)."""
        request = records.export_events_request(user_id, session_id, after)
        # The trace context of the caller now, not of whoever reads the first event.
        return self._export_events(request, self._trace())

    async def export_xml(self, user_id: str, session_id: str) -> str:
        """The session's event log as the XML history document."""
        request = records.export_xml_request(user_id, session_id)
        metadata = await self._metadata()
        call = self.session_stub.ExportEvents(request, timeout=self.timeout, metadata=metadata)
        try:
            return "".join([response.xml async for response in call])
        except grpc.RpcError as error:
            raise ContextdError.from_rpc_error(error) from error
        finally:
            call.cancel()

    async def end_session(self, user_id: str, session_id: str, *, mode: str = "") -> bool:
        """End the session (see :meth:`ContextClient.end_session`)."""
        request = records.end_session_request(user_id, session_id, mode)
        response = await self._call(self.session_stub.EndSession, request)
        return bool(response.ended)

    async def _export_events(
        self, request: Any, trace: CallMetadata
    ) -> AsyncIterator[SessionEvent]:
        metadata = await self._metadata(trace)
        call = self.session_stub.ExportEvents(request, timeout=self.timeout, metadata=metadata)
        try:
            async for response in call:
                yield records.event_from_json(response)
        except grpc.RpcError as error:
            raise ContextdError.from_rpc_error(error) from error
        finally:
            call.cancel()

    # Memories -----------------------------------------------------------------------

    async def add_memory(
        self,
        user_id: str,
        content: str,
        *,
        source_session_id: str = "",
        source_message_id: str | int = "",
        scope: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        valid_from: datetime | None = None,
        valid_to: datetime | None = None,
        expire_time: datetime | None = None,
    ) -> AddedMemory:
        """Store a memory of ``user_id``; the same text is stored once per scope.

        ``scope``: ``{"agent": ..., "app": ...}``; times are aware datetimes. Returns the
        memory dict with ``created``: false when the user already had it (the stored one
        is returned).
        """
        details = {"scope": scope, "metadata": metadata, "valid_from": valid_from}
        details.update(valid_to=valid_to, expire_time=expire_time)
        request = records.add_memory_request(
            user_id, content, source_session_id, source_message_id, details
        )
        return records.added_memory(await self._call(self.memory_stub.AddMemory, request))

    async def search_memories(
        self,
        user_id: str,
        query: str,
        *,
        limit: int = 0,
        filter: MemoryFilter | None = None,
        explain: bool = False,
    ) -> MemoryHits:
        """The user's memories most relevant to ``query``, best first, with their scores;
        ``filter`` (keys as in MemoryFilter: agent, app, metadata, created_after, ...,
        as_of) narrows them; ``explain`` adds each result's ``explain``: its term score
        and cosine (None where that search did not rank it)."""
        request = records.search_memories_request(user_id, query, limit, filter, explain)
        return records.scored_memories(await self._call(self.memory_stub.SearchMemories, request))

    async def list_memories(
        self, user_id: str, *, page_size: int = 0, filter: MemoryFilter | None = None
    ) -> list[Memory]:
        """Every memory of ``user_id`` that meets ``filter``, newest first (all pages)."""
        pages = self.iter_memories(user_id, page_size=page_size, filter=filter)
        return [m async for m in pages]

    def iter_memories(
        self, user_id: str, *, page_size: int = 0, filter: MemoryFilter | None = None
    ) -> AsyncIterator[Memory]:
        """:meth:`list_memories` lazily, for ``async for`` (no ``await``)."""
        return async_pages(
            functools.partial(self._call, self.memory_stub.ListMemories),
            lambda token: records.list_memories_request(user_id, page_size, token, filter),
            lambda response: map(records.memory_from_pb, response.memories),
        )

    async def delete_memory(self, user_id: str, memory_id: str | int) -> None:
        """Delete a memory, with the facts it superseded."""
        request = records.delete_memory_request(user_id, memory_id)
        await self._call(self.memory_stub.DeleteMemory, request)

    async def update_memory(
        self,
        user_id: str,
        memory_id: str | int,
        changes: Mapping[str, Any],
        *,
        supersede: bool = False,
    ) -> Memory:
        """Give the memory ``changes`` (keys among content, scope, metadata, valid_from,
        valid_to, expire_time; None clears). ``supersede`` with a new content keeps the
        old text as a superseded fact; without it the change is a correction."""
        request = memory_records.update_memory_request(user_id, memory_id, changes, supersede)
        response = await self._call(self.memory_stub.UpdateMemory, request)
        return records.memory_from_pb(response.memory)

    async def list_memory_history(
        self, user_id: str, *, memory_id: str | int = "", page_size: int = 0
    ) -> list[MemoryChange]:
        """How the user's memories (or one of them) changed, newest first (all pages)."""
        pages = self.iter_memory_history(user_id, memory_id=memory_id, page_size=page_size)
        return [c async for c in pages]

    def iter_memory_history(
        self, user_id: str, *, memory_id: str | int = "", page_size: int = 0
    ) -> AsyncIterator[MemoryChange]:
        """:meth:`list_memory_history` lazily, for ``async for`` (no ``await``)."""
        return async_pages(
            functools.partial(self._call, self.memory_stub.ListMemoryHistory),
            lambda token: memory_records.list_history_request(user_id, memory_id, page_size, token),
            lambda response: map(memory_records.change_from_pb, response.changes),
        )

    # Templates and skills ---------------------------------------------------------

    async def upsert_template(
        self, scenario: str, system_prompt: str, *, enabled: bool = True
    ) -> Template:
        """Create or replace a scenario's template; its ``version`` grows on each change."""
        request = records.upsert_template_request(scenario, system_prompt, enabled)
        response = await self._call(self.prompt_stub.UpsertTemplate, request)
        return records.template_from_pb(response.template)

    async def list_templates(self) -> list[Template]:
        response = await self._call(self.prompt_stub.ListTemplates, ppb.ListTemplatesRequest())
        return [records.template_from_pb(t) for t in response.templates]

    async def delete_template(self, scenario: str) -> None:
        request = ppb.DeleteTemplateRequest(scenario=scenario)
        await self._call(self.prompt_stub.DeleteTemplate, request)

    async def upsert_skill(
        self,
        name: str,
        prompt: str,
        *,
        description: str = "",
        apps: Sequence[str] = (),
        enabled: bool = True,
    ) -> Skill:
        """Create or replace a skill; ``apps`` are the hosts it applies to (none: every host)."""
        request = records.upsert_skill_request(name, prompt, description, apps, enabled)
        response = await self._call(self.prompt_stub.UpsertSkill, request)
        return records.skill_from_pb(response.skill)

    async def list_skills(self, *, app: str = "", enabled_only: bool = False) -> list[Skill]:
        """Skills for host ``app`` and for every host (``app=""``: all skills)."""
        request = records.list_skills_request(app, enabled_only)
        response = await self._call(self.prompt_stub.ListSkills, request)
        return [records.skill_from_pb(s) for s in response.skills]

    async def delete_skill(self, name: str) -> None:
        await self._call(self.prompt_stub.DeleteSkill, ppb.DeleteSkillRequest(name=name))

    # Users ------------------------------------------------------------------------

    async def delete_user(
        self, user_id: str, *, confirm_user_id: str | None = None
    ) -> DeletedCounts:
        """Erase everything stored for a user (sessions, messages, summaries, memories,
        memory history, event logs, API keys); returns how many of each went.

        Idempotent: a second call returns zeros. With a credential, an empty ``user_id``
        means the caller; ``confirm_user_id`` must then name that user (by default it
        repeats ``user_id``).
        """
        request = records.delete_user_request(user_id, confirm_user_id)
        return records.deleted_counts(await self._call(self.user_stub.DeleteUser, request))

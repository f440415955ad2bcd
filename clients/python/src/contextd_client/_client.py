"""The synchronous client."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import EllipsisType, TracebackType
from typing import Any

import grpc

from . import _chat_calls as chat_calls
from . import _context_calls as context_calls
from . import _records as records
from ._chat import ChatStream
from ._context_calls import CacheLayout, OutputFormat, OverflowPolicy
from ._credentials import (
    CallMetadata,
    TokenProvider,
    bearer,
    check_credentials,
    token_pair,
    with_pair,
)
from ._errors import ContextdError
from ._messages import MessageLike
from ._options import DEFAULT_TARGET, Metadata, call_metadata
from ._pages import pages
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


class ContextClient:
    """Synchronous client of contextd: ContextService, chat turns and session helpers.

    Connects to ``target`` over a channel that :meth:`close` closes: a TLS channel
    with ``credentials`` (``grpc.ssl_channel_credentials(...)``), else an insecure one.
    Or uses ``channel`` as given (``target`` and ``credentials`` are then ignored and
    the caller closes the channel). ``timeout`` is the deadline of each call in
    seconds (``None``: none); ``metadata`` is sent with every call. Every failed call
    raises :class:`ContextdError`.

    Credentials (for a server started with ``--auth api-key`` or ``--auth jwt``): either
    ``api_key``, or ``token``, a callable returning the current token that is called
    before every call (so a refreshed token is used as soon as it returns it). Either
    is sent as ``authorization: Bearer <token>``; they combine with ``credentials``.

    ``retries`` (a :class:`RetryPolicy`; default none) retries unary calls that fail
    with UNAVAILABLE; StreamChat and ExportEvents are never retried.

    ``propagate_trace`` (default on): when the process uses OpenTelemetry and a span is
    current, every call carries its trace context (``traceparent``) in its metadata; a
    ``traceparent`` in ``metadata`` wins.
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        timeout: float | None = 30.0,
        channel: grpc.Channel | None = None,
        metadata: Metadata | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        api_key: str | None = None,
        token: TokenProvider | None = None,
        retries: RetryPolicy | None = None,
        propagate_trace: bool = True,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.retries = retries
        self.metadata = call_metadata(metadata)
        self.propagate_trace = propagate_trace
        self._own_keys = metadata_keys(self.metadata)
        check_credentials(api_key, token, self.metadata, sync=True)
        self._key = None if api_key is None else bearer(api_key, "api_key")
        self._token = token
        self._owns_channel = channel is None
        self._channel: grpc.Channel = (
            channel
            if channel is not None
            else grpc.insecure_channel(target)
            if credentials is None
            else grpc.secure_channel(target, credentials)
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

    def _metadata(self, trace: CallMetadata | None = None) -> CallMetadata | None:
        """``metadata`` with the credential and ``trace`` (default: the current trace
        context); a provider's token is asked for now."""
        pair = self._key if self._token is None else token_pair(self._token)
        return with_trace(with_pair(self.metadata, pair), self._trace() if trace is None else trace)

    def _trace(self) -> CallMetadata:
        """The current trace context as metadata, when propagated."""
        return trace_metadata(self._own_keys) if self.propagate_trace else ()

    def _call(self, method: Callable[..., Any], request: Any) -> Any:
        attempt = 1
        while True:
            metadata = self._metadata()
            try:
                return method(request, timeout=self.timeout, metadata=metadata)
            except grpc.RpcError as error:
                delay = retry_delay(self.retries, error, attempt)
                if delay is None:
                    raise ContextdError.from_rpc_error(error) from error
            time.sleep(delay)
            attempt += 1

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
        request = context_calls.assemble_prompt_request(
            identity, rules, skill, mode, memory, context, tokenizer
        )
        return context_calls.assembled_prompt(self._call(self.stub.AssemblePrompt, request))

    def build_messages(
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
    ) -> BuildResult:
        """Build [system, ...history, user] under ``token_budget`` tokens.

        ``user_message`` is a string, or a list of parts: strings and images made with
        :func:`image_part` (a history message's ``content`` may be such a list too).
        Give the system prompt either as ``system_prompt`` (one text or several,
        joined by a newline) or as ``layers`` (``{"identity": ..., "rules": ...}``).
        ``history`` holds message dicts, oldest first. ``on_overflow="fail"`` makes
        the call fail with FAILED_PRECONDITION when the system prompt and the user
        message alone exceed the budget. ``session`` (``{"user_id", "session_id",
        "scenario", "host", "variables", "memory", ...}``) builds from a stored session
        instead: the system message from the server's context layers (system, scenario,
        session, memory, recent_sessions), the history from the session's window; leave
        ``system_prompt``, ``layers``, ``history`` and ``compression_summary`` out then.
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
        )
        if session is not None:
            request.session.CopyFrom(records.session_context_to_pb(session))
        return context_calls.build_result(self._call(self.stub.BuildMessages, request))

    def count_tokens(
        self,
        texts: str | Sequence[str] = (),
        messages: Sequence[MessageLike] = (),
        *,
        tokenizer: str = "",
    ) -> TokenCount:
        """Count tokens of texts and of message dicts (with per-message overhead)."""
        request = context_calls.count_tokens_request(texts, messages, tokenizer)
        return context_calls.token_count(self._call(self.stub.CountTokens, request))

    def list_tokenizers(self) -> TokenizerList:
        """The tokenizers the server knows, whether each is available, and the default."""
        request = context_calls.list_tokenizers_request()
        return context_calls.tokenizer_list(self._call(self.stub.ListTokenizers, request))

    def collect(
        self, user_id: str, message_id: str, *, remember: bool = False, uncollect: bool = False
    ) -> Collected:
        """Mark a stored assistant answer collected (``uncollect``: not), maybe remember it.

        Returns ``{"message_id", "is_collected", "memory_id"}``; ``memory_id`` is the
        memory holding the answer's text when ``remember`` is set, else "".
        """
        request = records.collect_request(user_id, message_id, remember, uncollect)
        return records.collected(self._call(self.stub.Collect, request))

    # Chat ---------------------------------------------------------------------------

    @chat_calls.takes_arguments_of(chat_calls.chat_turn)
    def stream_chat(self, turn: chat_calls.ChatTurn) -> ChatStream:
        """Run one chat turn; returns its events as they arrive (see :class:`ChatStream`).

        ``user_message`` is a string, or a list of parts (strings and :func:`image_part`).
        The events are TurnStarted, then TextDelta, ToolCallEvent and Usage as the model
        produces them, then TurnCompleted. ``session_id=""`` starts a new session (its
        id is ``TurnStarted.session_id``). ``timeout`` is the deadline of the whole turn
        in seconds; ``...`` means the client's timeout, ``None`` none. Requests the
        server refuses raise :class:`ContextdError` when the first event is read.

        The arguments are declared once, by :func:`chat_turn` (shared with
        :meth:`AsyncContextClient.stream_chat`): every field of StreamChatRequest has one,
        e.g. ``tool_protocol="react"`` for a model without native tool calling, and
        ``memory_limit``, ``recent_sessions_limit`` and ``cache_layout`` of the session.
        """
        call = self.chat_stub.StreamChat(
            turn.request, timeout=self._timeout(turn.timeout), metadata=self._metadata()
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
    ) -> Session:
        """Start a new, empty session of ``user_id``; returns it as a session dict."""
        request = records.create_session_request(user_id, scenario, host, title, metadata)
        return records.session_from_pb(self._call(self.session_stub.CreateSession, request).session)

    def get_session(self, user_id: str, session_id: str) -> Session:
        """A session of ``user_id`` as a dict (NOT_FOUND, or PERMISSION_DENIED if not theirs)."""
        request = records.get_session_request(user_id, session_id)
        return records.session_from_pb(self._call(self.session_stub.GetSession, request).session)

    def list_sessions(self, user_id: str, *, page_size: int = 0) -> list[Session]:
        """Every session of ``user_id``, most recently active first (all pages read)."""
        return list(self.iter_sessions(user_id, page_size=page_size))

    def iter_sessions(self, user_id: str, *, page_size: int = 0) -> Iterator[Session]:
        """:meth:`list_sessions` lazily: each page is asked for when the last is used up."""
        return pages(
            functools.partial(self._call, self.session_stub.ListSessions),
            lambda token: records.list_sessions_request(user_id, page_size, token),
            lambda response: map(records.session_from_pb, response.sessions),
        )

    def delete_session(self, user_id: str, session_id: str) -> None:
        """Delete a session with its messages, summaries and event log; memories stay."""
        request = spb.DeleteSessionRequest(**records.session_ref(user_id, session_id))
        self._call(self.session_stub.DeleteSession, request)

    def append_messages(
        self,
        user_id: str,
        session_id: str,
        messages: Sequence[MessageLike],
        *,
        turn_index: int = 0,
    ) -> list[StoredMessage]:
        """Store messages at the end of a session, in one transaction; returns them stored."""
        request = records.append_messages_request(user_id, session_id, messages, turn_index)
        response = self._call(self.session_stub.AppendMessages, request)
        return [records.session_message_from_pb(m) for m in response.messages]

    def list_messages(
        self, user_id: str, session_id: str, *, page_size: int = 0
    ) -> list[StoredMessage]:
        """Every stored message of a session, oldest first, as dicts (all pages read)."""
        return list(self.iter_messages(user_id, session_id, page_size=page_size))

    def iter_messages(
        self, user_id: str, session_id: str, *, page_size: int = 0
    ) -> Iterator[StoredMessage]:
        """:meth:`list_messages` lazily: each page is asked for when the last is used up."""
        return pages(
            functools.partial(self._call, self.session_stub.ListMessages),
            lambda token: records.list_messages_request(user_id, session_id, page_size, token),
            lambda response: map(records.session_message_from_pb, response.messages),
        )

    def add_compression_summary(
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
        return str(self._call(self.session_stub.AddCompressionSummary, request).summary_id)

    def set_session_summary(self, user_id: str, session_id: str, summary: str) -> None:
        """Set the short summary the user's other sessions see in their recent_sessions
        context layer."""
        request = records.session_summary_request(user_id, session_id, summary)
        self._call(self.session_stub.SetSessionSummary, request)

    def export_events(
        self, user_id: str, session_id: str, *, after: int = 0
    ) -> Iterator[SessionEvent]:
        """The session's event log, oldest first, one dict per event (skipping ``after``)."""
        request = records.export_events_request(user_id, session_id, after)
        # The trace context of the caller now, not of whoever reads the first event.
        return self._export_events(request, self._trace())

    def export_xml(self, user_id: str, session_id: str) -> str:
        """The session's event log as the XML history document."""
        request = records.export_xml_request(user_id, session_id)
        call = self.session_stub.ExportEvents(
            request, timeout=self.timeout, metadata=self._metadata()
        )
        try:
            return "".join(response.xml for response in call)
        except grpc.RpcError as error:
            raise ContextdError.from_rpc_error(error) from error
        finally:
            call.cancel()

    def end_session(self, user_id: str, session_id: str, *, mode: str = "") -> bool:
        """End the session (its log gets session_end with ``mode``; a later turn opens it
        again). False when it was already ended."""
        request = records.end_session_request(user_id, session_id, mode)
        return bool(self._call(self.session_stub.EndSession, request).ended)

    def _export_events(self, request: Any, trace: CallMetadata) -> Iterator[SessionEvent]:
        call = self.session_stub.ExportEvents(
            request, timeout=self.timeout, metadata=self._metadata(trace)
        )
        try:
            for response in call:
                yield records.event_from_json(response)
        except grpc.RpcError as error:
            raise ContextdError.from_rpc_error(error) from error
        finally:
            call.cancel()

    # Memories -----------------------------------------------------------------------

    def add_memory(
        self,
        user_id: str,
        content: str,
        *,
        source_session_id: str = "",
        source_message_id: str | int = "",
    ) -> AddedMemory:
        """Store a memory of ``user_id``; the same text is stored once.

        Returns the memory dict with ``created``: false when the user already had it
        (the stored one is returned).
        """
        request = records.add_memory_request(user_id, content, source_session_id, source_message_id)
        return records.added_memory(self._call(self.memory_stub.AddMemory, request))

    def search_memories(self, user_id: str, query: str, *, limit: int = 0) -> MemoryHits:
        """The user's memories most relevant to ``query``, best first, with their scores."""
        request = records.search_memories_request(user_id, query, limit)
        return records.scored_memories(self._call(self.memory_stub.SearchMemories, request))

    def list_memories(self, user_id: str, *, page_size: int = 0) -> list[Memory]:
        """Every memory of ``user_id``, newest first (all pages read)."""
        return list(self.iter_memories(user_id, page_size=page_size))

    def iter_memories(self, user_id: str, *, page_size: int = 0) -> Iterator[Memory]:
        """:meth:`list_memories` lazily: each page is asked for when the last is used up."""
        return pages(
            functools.partial(self._call, self.memory_stub.ListMemories),
            lambda token: records.list_memories_request(user_id, page_size, token),
            lambda response: map(records.memory_from_pb, response.memories),
        )

    def delete_memory(self, user_id: str, memory_id: str | int) -> None:
        request = records.delete_memory_request(user_id, memory_id)
        self._call(self.memory_stub.DeleteMemory, request)

    # Templates and skills ---------------------------------------------------------

    def upsert_template(
        self, scenario: str, system_prompt: str, *, enabled: bool = True
    ) -> Template:
        """Create or replace a scenario's template; its ``version`` grows on each change."""
        request = records.upsert_template_request(scenario, system_prompt, enabled)
        response = self._call(self.prompt_stub.UpsertTemplate, request)
        return records.template_from_pb(response.template)

    def list_templates(self) -> list[Template]:
        response = self._call(self.prompt_stub.ListTemplates, ppb.ListTemplatesRequest())
        return [records.template_from_pb(t) for t in response.templates]

    def delete_template(self, scenario: str) -> None:
        request = ppb.DeleteTemplateRequest(scenario=scenario)
        self._call(self.prompt_stub.DeleteTemplate, request)

    def upsert_skill(
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
        return records.skill_from_pb(self._call(self.prompt_stub.UpsertSkill, request).skill)

    def list_skills(self, *, app: str = "", enabled_only: bool = False) -> list[Skill]:
        """Skills for host ``app`` and for every host (``app=""``: all skills)."""
        request = records.list_skills_request(app, enabled_only)
        response = self._call(self.prompt_stub.ListSkills, request)
        return [records.skill_from_pb(s) for s in response.skills]

    def delete_skill(self, name: str) -> None:
        self._call(self.prompt_stub.DeleteSkill, ppb.DeleteSkillRequest(name=name))

    # Users ------------------------------------------------------------------------

    def delete_user(self, user_id: str, *, confirm_user_id: str | None = None) -> DeletedCounts:
        """Erase everything stored for a user (sessions, messages, summaries, memories,
        memory history, event logs, API keys); returns how many of each went.

        Idempotent: a second call returns zeros. With a credential, an empty ``user_id``
        means the caller; ``confirm_user_id`` must then name that user (by default it
        repeats ``user_id``).
        """
        request = records.delete_user_request(user_id, confirm_user_id)
        return records.deleted_counts(self._call(self.user_stub.DeleteUser, request))

"""Sessions, their messages and summaries, Collect, and a session's end: the stored side
of a chat."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from contextd.app.pagination import bad_page_token, page_size
from contextd.app.scope import Caller, not_found, owned_session, parse_id
from contextd.core.errors import InvalidArgument, Violations, shown
from contextd.core.messages import ChatMessage, Role
from contextd.core.pipeline import is_blank, validate_history
from contextd.core.tokens import TokenizerRegistry
from contextd.store.conversation import ConversationRepo
from contextd.store.event_log.events import EventStore, SessionLog, check_mode
from contextd.store.memory.repository import MemoryRepo
from contextd.store.models import CompressionSummaryRow, Session, StoredMessage, new_message
from contextd.store.sessions import SessionRepo
from contextd.store.summaries import SummaryRepo

MAX_TEXT = 256  # scenario, host, title, metadata keys
MAX_APPEND = 1000


class TurnGate(Protocol):
    """Where a session's turns wait for each other (app/chat/session_lease.py)."""

    def ending(
        self, session: Session, deadline: float | None
    ) -> AbstractAsyncContextManager[None]: ...


@dataclass(frozen=True, slots=True)
class SessionsApp:
    sessions: SessionRepo
    conversation: ConversationRepo
    summaries: SummaryRepo
    memories: MemoryRepo
    tokenizers: TokenizerRegistry
    event_log: EventStore
    _turns: TurnGate  # a session ends between its turns
    _provider_name: str  # what answers them, for the session's last line

    async def create(
        self,
        caller: Caller,
        scenario: str = "",
        host: str = "",
        title: str = "",
        metadata: Mapping[str, str] | None = None,
    ) -> Session:
        v = Violations()
        for field, value in (("scenario", scenario), ("host", host), ("title", title)):
            if len(value) > MAX_TEXT:
                v.add(field, f"at most {MAX_TEXT} characters")
        for key in metadata or {}:
            if not key.strip() or len(key) > MAX_TEXT:
                v.add(f"metadata[{shown(key)}]", f"keys must be 1-{MAX_TEXT} non-blank characters")
        v.raise_if_any()
        return await self.sessions.create(
            caller.user_id, scenario, host, title, dict(metadata or {}), tenant_id=caller.tenant_id
        )

    async def get(self, caller: Caller, session_id: str) -> Session:
        return await owned_session(self.sessions, caller, session_id)

    async def end_session(
        self, caller: Caller, session_id: str, mode: str, deadline: float | None = None
    ) -> bool:
        """Write session_end, with ``mode`` and the session's configuration, unless the
        session's log already ends with it; whether it wrote. Waits for a running turn of
        the session, as its next turn would, so that the end comes after that turn."""
        v = Violations()
        check_mode(mode, "mode", v)
        v.raise_if_any()
        session = await self.get(caller, session_id)
        async with self._turns.ending(session, deadline):
            log = SessionLog(self.event_log, session)
            if await log.ended():
                return False
            await log.end(
                {
                    "mode": mode or "session",
                    "provider": self._provider_name,
                    "scenario": session.scenario,
                    "host": session.host,
                    "title": session.title,
                    "metadata": session.metadata,
                }
            )
            return True

    async def list_sessions(
        self, caller: Caller, size: int, token: str
    ) -> tuple[list[Session], str]:
        size = page_size(size, 50, 200)
        try:
            return await self.sessions.list_sessions(
                caller.user_id, size, token, tenant_id=caller.tenant_id
            )
        except ValueError as error:
            raise bad_page_token(error) from None

    async def delete(self, caller: Caller, session_id: str) -> None:
        await self.get(caller, session_id)
        await self.sessions.delete(session_id, tenant_id=caller.tenant_id)
        await self.event_log.delete(session_id, tenant_id=caller.tenant_id)

    async def append(
        self, caller: Caller, session_id: str, messages: Sequence[ChatMessage], turn_index: int = 0
    ) -> list[StoredMessage]:
        v = Violations()
        if not messages:
            v.add("messages", "at least one message")
        if len(messages) > MAX_APPEND:
            v.add("messages", f"at most {MAX_APPEND} messages per call")
        if turn_index < 0:
            v.add("turn_index", "must not be negative")
        validate_history(messages, v, field="messages")
        for i, m in enumerate(messages):
            if m.id:
                v.add(f"messages[{i}].id", "ids are assigned by the server; leave it empty")
        v.raise_if_any()
        await self.get(caller, session_id)
        # Turns only grow: 0 (unset) is the turn after the newest, as a chat turn would be;
        # a number may continue the newest turn or skip ahead, never go back.
        last = await self.conversation.last_turn(session_id, tenant_id=caller.tenant_id)
        if not turn_index:
            turn_index = last + 1
        elif turn_index < last:
            raise InvalidArgument.one(
                "turn_index", f"turns only grow: the session is at turn {last}; 0 for the next"
            )
        rows = [new_message(self.tokenizers, m, turn_index) for m in messages]
        return await self.conversation.append(
            session_id, caller.user_id, rows, tenant_id=caller.tenant_id
        )

    async def list_messages(
        self, caller: Caller, session_id: str, size: int, token: str
    ) -> tuple[list[StoredMessage], str]:
        size = page_size(size, 100, 500)
        await self.get(caller, session_id)
        try:
            return await self.conversation.list_messages(
                session_id, size, token, tenant_id=caller.tenant_id
            )
        except ValueError as error:
            raise bad_page_token(error) from None

    async def add_compression_summary(
        self,
        caller: Caller,
        session_id: str,
        message_ids: Sequence[str],
        start_message_id: str,
        summary: str,
    ) -> CompressionSummaryRow:
        v = Violations()
        if is_blank(summary):
            v.add("summary", "the summary text must not be blank")
        if not message_ids:
            v.add("message_ids", "at least one message id")
        if start_message_id not in message_ids:
            v.add("start_message_id", "must be one of message_ids")
        v.raise_if_any()
        await self.get(caller, session_id)
        ids: list[int] = []
        for k, raw in enumerate(message_ids):
            stored = await self.message(caller, raw, f"message_ids[{k}]")
            if stored.session_id != session_id:
                raise InvalidArgument.one(f"message_ids[{k}]", "not a message of this session")
            ids.append(stored.id)
        start = ids[list(message_ids).index(start_message_id)]
        return await self.summaries.add_compression(session_id, ids, start, summary)

    async def set_session_summary(self, caller: Caller, session_id: str, summary: str) -> None:
        if is_blank(summary):
            raise InvalidArgument.one("summary", "the summary text must not be blank")
        await self.get(caller, session_id)
        await self.summaries.upsert_session_summary(
            session_id, caller.user_id, summary, by_host=True, tenant_id=caller.tenant_id
        )

    async def collect(
        self, caller: Caller, message_id: str, uncollect: bool, remember: bool
    ) -> tuple[StoredMessage, str]:
        """Set is_collected on an assistant answer (idempotent); maybe remember it.

        Returns the message and the id of the memory stored or found ("" when none).
        """
        stored = await self.message(caller, message_id, "message_id")
        if stored.message.role is not Role.ASSISTANT:
            raise InvalidArgument.one("message_id", "only assistant answers can be collected")
        if remember and uncollect:
            raise InvalidArgument.one("remember", "cannot remember an answer being uncollected")
        if remember and is_blank(stored.message.content):
            raise InvalidArgument.one("remember", "the answer has no text to remember")
        updated = await self.conversation.set_collected(
            stored.id, not uncollect, tenant_id=caller.tenant_id
        )
        if updated is None:  # deleted between the two calls
            raise not_found("message", "message_id")
        memory_id = ""
        if remember:
            memory, _ = await self.memories.add(
                caller.user_id,
                stored.message.content,
                stored.session_id,
                stored.id,
                tenant_id=caller.tenant_id,
            )
            memory_id = str(memory.id)
        return updated, memory_id

    async def events(
        self, caller: Caller, session_id: str, after: int
    ) -> AsyncIterator[dict[str, Any]]:
        """The session's event log, oldest first, skipping the first ``after`` events."""
        if after < 0:
            raise InvalidArgument.one("after", "must not be negative")
        await self.get(caller, session_id)
        async for event in self.event_log.read(
            session_id, after_line=after, tenant_id=caller.tenant_id
        ):
            yield event

    async def message(self, caller: Caller, message_id: str, field: str) -> StoredMessage:
        """The caller's stored message; NOT_FOUND for one that is not (another user's too)."""
        message = parse_id(message_id, field, "message")
        stored = await self.conversation.get(message, tenant_id=caller.tenant_id)
        if stored is None or not caller.owns(stored.user_id):
            raise not_found("message", field)
        return stored

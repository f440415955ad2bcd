"""A user's memories: add, search, list, delete."""

from __future__ import annotations

from contextd.app.pagination import bad_page_token, page_size
from contextd.app.scope import Caller, is_stored_id, not_found, parse_id
from contextd.app.sessions import SessionsApp
from contextd.core.errors import InvalidArgument, Violations
from contextd.core.pipeline import is_blank
from contextd.store.memory.hybrid import MemorySearchResult
from contextd.store.memory.repository import MemoryRepo
from contextd.store.models import Memory

MAX_MEMORY_CHARS = 4000
MAX_QUERY_CHARS = 4000


class MemoriesApp:
    def __init__(self, memories: MemoryRepo, sessions: SessionsApp) -> None:
        self.memories = memories
        self.sessions = sessions

    async def add(
        self, caller: Caller, content: str, source_session_id: str = "", source_message_id: str = ""
    ) -> tuple[Memory, bool]:
        v = Violations()
        if is_blank(content):
            v.add("content", "a memory needs text")
        elif len(content) > MAX_MEMORY_CHARS:
            v.add("content", f"at most {MAX_MEMORY_CHARS} characters")
        if source_message_id and not is_stored_id(source_message_id):
            v.add("source_message_id", "a stored message id (digits)")
        v.raise_if_any()
        await self._check_sources(caller, source_session_id, source_message_id)
        return await self.memories.add(
            caller.user_id,
            content,
            source_session_id,
            int(source_message_id or 0),
            tenant_id=caller.tenant_id,
        )

    async def _check_sources(self, caller: Caller, session_id: str, message_id: str) -> None:
        """A memory's source is the caller's own: a session and message of theirs, the
        message in that session when both are given."""
        if session_id:
            await self.sessions.get(caller, session_id)
        if message_id:
            message = await self.sessions.message(caller, message_id, "source_message_id")
            if session_id and message.session_id != session_id:
                raise InvalidArgument.one("source_message_id", "not a message of source_session_id")

    async def search(self, caller: Caller, query: str, limit: int) -> MemorySearchResult:
        limit = page_size(limit, 10, 100, field="limit")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidArgument.one("query", f"at most {MAX_QUERY_CHARS} characters")
        return await self.memories.search_noted(
            caller.user_id, query, limit, tenant_id=caller.tenant_id
        )

    async def list_memories(
        self, caller: Caller, size: int, token: str
    ) -> tuple[list[Memory], str]:
        size = page_size(size, 50, 200)
        try:
            return await self.memories.list_memories(
                caller.user_id, size, token, tenant_id=caller.tenant_id
            )
        except ValueError as error:
            raise bad_page_token(error) from None

    async def delete(self, caller: Caller, memory_id: str) -> None:
        # Another tenant's memory is not found: its existence is not revealed.
        memory = await self.memories.get(
            parse_id(memory_id, "memory_id", "memory"), tenant_id=caller.tenant_id
        )
        if memory is None or not caller.owns(memory.user_id):
            raise not_found("memory", "memory_id")
        await self.memories.delete(memory.id)

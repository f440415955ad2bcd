"""A user's memories: add, search, list, update, delete, and their history.

What a request may hold is checked here (sizes, scope names, metadata, times), each bad
field named; the store does what is asked. Which scopes a session's build and the work
after a turn see is decided in app/scope.py; how long a scope's memories are kept
by default, here (ExpiryDefaults).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from contextd.app.pagination import bad_page_token, page_size
from contextd.app.scope import Caller, is_stored_id, is_user_id, not_found, parse_id
from contextd.app.sessions import SessionsApp
from contextd.core.errors import FailedPrecondition, InvalidArgument, Violations
from contextd.core.pipeline import is_blank
from contextd.store.memory.filters import MemoryFilter
from contextd.store.memory.history import MemoryChange, MemoryHistoryRepo
from contextd.store.memory.hybrid import MemorySearchResult
from contextd.store.memory.repository import MemoryRepo
from contextd.store.memory.versions import (
    PLAIN,
    MemoryConflict,
    MemoryDetails,
    MemoryEdit,
    MemorySuperseded,
)
from contextd.store.models import Memory

MAX_MEMORY_CHARS = 4000
MAX_QUERY_CHARS = 4000
MAX_SCOPE_CHARS = 64
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 256
DAY = 86400.0


@dataclass(frozen=True, slots=True)
class MemoryFilterRequest:
    """A search's or listing's filter as the caller sent it (times in epoch seconds)."""

    agent: str | None = None
    app: str | None = None
    metadata: Mapping[str, str] | None = None
    created_after: float | None = None
    created_before: float | None = None
    updated_after: float | None = None
    updated_before: float | None = None
    as_of: float | None = None


def check_scope(value: str, field: str, v: Violations) -> None:
    if value and (len(value) > MAX_SCOPE_CHARS or not is_user_id(value)):
        v.add(field, f"0 to {MAX_SCOPE_CHARS} visible characters, no spaces or controls")


def check_metadata(metadata: Mapping[str, str], field: str, v: Violations) -> None:
    """Bounded sizes; a bad key or value is described, never quoted."""
    if len(metadata) > MAX_METADATA_PAIRS:
        v.add(field, f"at most {MAX_METADATA_PAIRS} pairs")
        return
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY_CHARS or not is_user_id(key):
            v.add(field, f"keys are 1 to {MAX_METADATA_KEY_CHARS} visible characters, no spaces")
            return
        if len(value) > MAX_METADATA_VALUE_CHARS or any(
            c < " " or "\x7f" <= c < "\xa0" for c in value
        ):
            v.add(field, f"values are at most {MAX_METADATA_VALUE_CHARS} characters, no controls")
            return


def check_details(d: MemoryDetails, prefix: str, now: float, v: Violations) -> None:
    check_scope(d.agent, f"{prefix}scope.agent", v)
    check_scope(d.app, f"{prefix}scope.app", v)
    check_metadata(d.metadata, f"{prefix}metadata", v)
    if d.valid_from is not None and d.valid_to is not None and d.valid_to <= d.valid_from:
        v.add(f"{prefix}valid_to", "must be after valid_from")
    if d.expires_at is not None and d.expires_at <= now:
        v.add(f"{prefix}expire_time", "must be in the future")


def memory_filter(request: MemoryFilterRequest, field: str = "filter") -> MemoryFilter:
    """The store's filter for a request's; INVALID_ARGUMENT naming a bad field."""
    v = Violations()
    if request.agent is not None:
        check_scope(request.agent, f"{field}.agent", v)
    if request.app is not None:
        check_scope(request.app, f"{field}.app", v)
    check_metadata(request.metadata or {}, f"{field}.metadata", v)
    v.raise_if_any()
    return MemoryFilter(
        agents=None if request.agent is None else (request.agent,),
        apps=None if request.app is None else (request.app,),
        metadata=tuple(sorted((request.metadata or {}).items())),
        created_after=request.created_after,
        created_before=request.created_before,
        updated_after=request.updated_after,
        updated_before=request.updated_before,
        as_of=request.as_of,
    )


@dataclass(frozen=True, slots=True)
class ExpiryDefaults:
    """``--memory-expiry-days``: days a scope's memories are kept when AddMemory gives no
    expiry, by app and by agent (``app:word=30,agent:planner=7``); a memory of an app and
    an agent that both have one gets the sooner."""

    apps: dict[str, float] = field(default_factory=dict)
    agents: dict[str, float] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> ExpiryDefaults:
        """``app:NAME=DAYS`` and ``agent:NAME=DAYS``, comma-separated; ValueError naming
        what is wrong."""
        apps: dict[str, float] = {}
        agents: dict[str, float] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            scope, _, days_text = item.partition("=")
            kind, _, name = scope.strip().partition(":")
            target = {"app": apps, "agent": agents}.get(kind)
            try:
                days = float(days_text)
            except ValueError:
                days = math.nan
            if target is None or not is_user_id(name) or not (math.isfinite(days) and days > 0):
                raise ValueError(
                    "--memory-expiry-days takes app:NAME=DAYS or agent:NAME=DAYS items, "
                    f"comma-separated, with a positive number of days (not {item[:80]!r})"
                )
            target[name] = days
        return cls(apps, agents)

    def apply(self, details: MemoryDetails, now: float) -> MemoryDetails:
        """``details`` with the expiry its scope's defaults give (the sooner of its app's
        and its agent's), when it has none."""
        days = [
            d for d in (self.apps.get(details.app), self.agents.get(details.agent)) if d is not None
        ]
        if details.expires_at is not None or not days:
            return details
        return replace(details, expires_at=now + min(days) * DAY)


class MemoriesApp:
    def __init__(
        self,
        memories: MemoryRepo,
        sessions: SessionsApp,
        history: MemoryHistoryRepo,
        expiry: ExpiryDefaults | None = None,
    ) -> None:
        self.memories = memories
        self.sessions = sessions
        self.history = history
        self.expiry = expiry or ExpiryDefaults()

    async def add(
        self,
        caller: Caller,
        content: str,
        source_session_id: str = "",
        source_message_id: str = "",
        details: MemoryDetails = PLAIN,
        *,
        now: float | None = None,
    ) -> tuple[Memory, bool]:
        now = time.time() if now is None else now
        v = Violations()
        if is_blank(content):
            v.add("content", "a memory needs text")
        elif len(content) > MAX_MEMORY_CHARS:
            v.add("content", f"at most {MAX_MEMORY_CHARS} characters")
        if source_message_id and not is_stored_id(source_message_id):
            v.add("source_message_id", "a stored message id (digits)")
        check_details(details, "", now, v)
        v.raise_if_any()
        if details.expires_at is None:
            details = self.expiry.apply(details, now)
        await self._check_sources(caller, source_session_id, source_message_id)
        return await self.memories.add(
            caller.user_id,
            content,
            source_session_id,
            int(source_message_id or 0),
            tenant_id=caller.tenant_id,
            now=now,
            details=details,
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

    async def search(
        self, caller: Caller, query: str, limit: int, found_by: MemoryFilter
    ) -> MemorySearchResult:
        limit = page_size(limit, 10, 100, field="limit")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidArgument.one("query", f"at most {MAX_QUERY_CHARS} characters")
        return await self.memories.search_noted(
            caller.user_id, query, limit, tenant_id=caller.tenant_id, memory_filter=found_by
        )

    async def list_memories(
        self, caller: Caller, size: int, token: str, found_by: MemoryFilter
    ) -> tuple[list[Memory], str]:
        size = page_size(size, 50, 200)
        try:
            return await self.memories.list_memories(
                caller.user_id, size, token, tenant_id=caller.tenant_id, memory_filter=found_by
            )
        except ValueError as error:
            raise bad_page_token(error) from None

    async def _own(self, caller: Caller, memory_id: str, field: str = "memory_id") -> Memory:
        """The caller's memory; another user's or tenant's is not found, as a deleted one
        (its existence is not revealed)."""
        memory = await self.memories.get(
            parse_id(memory_id, field, "memory"), tenant_id=caller.tenant_id
        )
        if memory is None or not caller.owns(memory.user_id):
            raise not_found("memory", field)
        return memory

    async def delete(self, caller: Caller, memory_id: str) -> None:
        memory = await self._own(caller, memory_id)
        await self.memories.delete(memory.id)

    async def update(
        self, caller: Caller, memory_id: str, change: MemoryEdit, *, now: float | None = None
    ) -> Memory:
        now = time.time() if now is None else now
        v = Violations()
        if not change.changes:
            v.add("update_mask", f"name the fields to change: {', '.join(sorted(_MASK))}")
        if "content" in change.changes:
            if is_blank(change.content):
                v.add("memory.content", "a memory needs text")
            elif len(change.content) > MAX_MEMORY_CHARS:
                v.add("memory.content", f"at most {MAX_MEMORY_CHARS} characters")
        elif change.supersede:
            v.add("supersede", "supersedes with a new content only: name content in update_mask")
        check_details(change.details, "memory.", now, v)
        v.raise_if_any()
        memory = await self._own(caller, memory_id)
        named, d = change.changes, change.details
        starts = d.valid_from if "valid_from" in named else memory.valid_from
        ends = d.valid_to if "valid_to" in named else memory.valid_to
        if starts is not None and ends is not None and ends <= starts:
            raise InvalidArgument.one("memory.valid_to", "must be after the memory's valid_from")
        try:
            updated = await self.history.edit(
                memory.id, (caller.tenant_id, caller.user_id), change, now=now
            )
        except MemorySuperseded as error:
            raise NamesAMemory(
                "the memory is a superseded fact; change memory {} instead", error.by_id
            ) from None
        except MemoryConflict as error:
            raise NamesAMemory(
                "memory {} already says this in that scope", error.other_id
            ) from None
        if updated is None:  # deleted meanwhile
            raise not_found("memory", "memory_id")
        return updated

    async def changes(
        self, caller: Caller, memory_id: str, size: int, token: str
    ) -> tuple[list[MemoryChange], str]:
        size = page_size(size, 50, 200)
        mid = (await self._own(caller, memory_id)).id if memory_id else 0
        try:
            return await self.history.page((caller.tenant_id, caller.user_id), mid, size, token)
        except ValueError as error:
            raise bad_page_token(error) from None


class NamesAMemory(FailedPrecondition):
    """A refusal that names another memory: ``template``'s ``{}`` is its id as callers
    see it, which the gRPC front fills in (app/ holds the row number); the message
    without it."""

    def __init__(self, template: str, row: int) -> None:
        super().__init__(template.format("(its id unknown)"))
        self.template = template
        self.row = row


# UpdateMemory's update_mask paths -> the names MemoryEdit.changes takes.
_MASK = {
    "content": "content",
    "scope": "scope",
    "metadata": "metadata",
    "valid_from": "valid_from",
    "valid_to": "valid_to",
    "expire_time": "expires_at",
}


def edited_fields(paths: list[str]) -> frozenset[str]:
    """The store's names of an update mask's paths; INVALID_ARGUMENT for another path."""
    unknown = [p for p in paths if p not in _MASK]
    if unknown:
        raise InvalidArgument.one(
            "update_mask", f"paths are among {', '.join(sorted(_MASK))}; got {len(unknown)} other"
        )
    return frozenset(_MASK[p] for p in paths)

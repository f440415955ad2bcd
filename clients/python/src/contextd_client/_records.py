"""Requests and results of the stored-data calls: Collect, sessions, memories, prompts.

Results are plain dicts; timestamps are aware UTC datetimes (``None`` when unset).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from ._errors import InvalidResponseError
from ._fields import _MEMORY_MODES, _cache_layout, _ident, _int, _text, _type_name
from ._memory_records import add_fields, memory_fields, memory_filter
from ._messages import MessageLike, message_from_pb, messages_to_pb
from ._pb import context_pb2 as pb
from ._pb import memory_pb2 as mpb
from ._pb import prompts_pb2 as ppb
from ._pb import sessions_pb2 as spb
from ._pb import users_pb2 as upb
from ._record_types import (
    AddedMemory,
    Collected,
    DeletedCounts,
    Memory,
    MemoryHits,
    ScoredMemory,
    Session,
    SessionEvent,
    Skill,
    StoredMessage,
    Template,
)


def _texts(values: object, where: str) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise TypeError(f"{where} must be a sequence of strings, not {_type_name(values)}")
    return [_text(value, f"{where}[{i}]") for i, value in enumerate(values)]


def _ids(values: object, where: str) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise TypeError(f"{where} must be a sequence of ids, not {_type_name(values)}")
    return [_ident(value, f"{where}[{i}]") for i, value in enumerate(values)]


def _time(message: Any, name: str) -> datetime | None:
    """A Timestamp field as an aware UTC datetime; ``None`` when unset."""
    if not message.HasField(name):
        return None
    return cast(datetime, getattr(message, name).ToDatetime(tzinfo=UTC))


# Session mode of BuildMessages -----------------------------------------------------

SESSION_CONTEXT_KEYS = (
    "user_id",
    "session_id",
    "scenario",
    "host",
    "variables",
    "memory",
    "memory_limit",
    "recent_sessions_limit",
    "cache_layout",
)


def session_context_to_pb(session: object) -> pb.SessionContext:
    """``{"user_id", "session_id", ...}`` (keys as in SessionContext) as the message."""
    if not isinstance(session, Mapping):
        raise TypeError(f"session must be a mapping, not {_type_name(session)}")
    unknown = [str(key) for key in session if key not in SESSION_CONTEXT_KEYS]
    if unknown:
        raise ValueError(
            f"session has no key {', '.join(map(repr, unknown))}; "
            f"keys are {', '.join(SESSION_CONTEXT_KEYS)}"
        )
    memory = session.get("memory")
    if memory not in _MEMORY_MODES:
        raise TypeError(f"session['memory'] must be True, False or None, not {memory!r}")
    layout = _cache_layout(session.get("cache_layout"), "session['cache_layout']")
    variables = session.get("variables") or {}
    if not isinstance(variables, Mapping):
        raise TypeError(f"session['variables'] must be a mapping, not {_type_name(variables)}")
    return pb.SessionContext(
        user_id=_ident(session.get("user_id"), "session['user_id']"),
        session_id=_ident(session.get("session_id"), "session['session_id']"),
        scenario=_text(session.get("scenario"), "session['scenario']"),
        host=_text(session.get("host"), "session['host']"),
        variables={
            _text(k, "session['variables'] key"): _text(v, f"session['variables'][{k!r}]")
            for k, v in variables.items()
        },
        memory=cast(pb.MemoryMode, _MEMORY_MODES[memory]),
        memory_limit=_int(session.get("memory_limit", 0), "session['memory_limit']"),
        recent_sessions_limit=_int(
            session.get("recent_sessions_limit", 0), "session['recent_sessions_limit']"
        ),
        cache_layout=layout,
    )


# Collect ----------------------------------------------------------------------------


def collect_request(
    user_id: str, message_id: str, remember: bool, uncollect: bool
) -> pb.CollectRequest:
    return pb.CollectRequest(
        user_id=_ident(user_id, "user_id"),
        message_id=_ident(message_id, "message_id"),
        remember=bool(remember),
        uncollect=bool(uncollect),
    )


def collected(response: pb.CollectResponse) -> Collected:
    return {
        "message_id": response.message_id,
        "is_collected": response.is_collected,
        "memory_id": response.memory_id,
    }


# Sessions ---------------------------------------------------------------------------


def session_ref(user_id: str, session_id: str) -> dict[str, str]:
    """The user and session fields most session requests start with."""
    return {"user_id": _ident(user_id, "user_id"), "session_id": _ident(session_id, "session_id")}


def list_sessions_request(user_id: str, page_size: int, page_token: str) -> spb.ListSessionsRequest:
    return spb.ListSessionsRequest(
        user_id=_ident(user_id, "user_id"),
        page_size=_int(page_size, "page_size"),
        page_token=page_token,
    )


def append_messages_request(
    user_id: str, session_id: str, messages: Sequence[MessageLike], turn_index: int
) -> spb.AppendMessagesRequest:
    return spb.AppendMessagesRequest(
        **session_ref(user_id, session_id),
        messages=messages_to_pb(messages, "messages"),
        turn_index=_int(turn_index, "turn_index"),
    )


def compression_summary_request(
    user_id: str,
    session_id: str,
    message_ids: Sequence[str | int],
    summary: str,
    start_message_id: str | int | None,
) -> spb.AddCompressionSummaryRequest:
    ids = _ids(message_ids, "message_ids")
    start = ids[0] if start_message_id is None and ids else start_message_id
    return spb.AddCompressionSummaryRequest(
        **session_ref(user_id, session_id),
        message_ids=ids,
        start_message_id=_ident(start, "start_message_id"),
        summary=_text(summary, "summary"),
    )


def session_summary_request(
    user_id: str, session_id: str, summary: str
) -> spb.SetSessionSummaryRequest:
    return spb.SetSessionSummaryRequest(
        **session_ref(user_id, session_id), summary=_text(summary, "summary")
    )


def session_from_pb(session: spb.Session) -> Session:
    return {
        "id": session.id,
        "user_id": session.user_id,
        "scenario": session.scenario,
        "host": session.host,
        "title": session.title,
        "metadata": dict(session.metadata),
        "create_time": _time(session, "create_time"),
        "update_time": _time(session, "update_time"),
        "message_count": session.message_count,
    }


def session_message_from_pb(stored: spb.SessionMessage) -> StoredMessage:
    """A stored message: the message dict plus where and how it is stored."""
    out = message_from_pb(stored.message)
    out.update(
        session_id=stored.session_id,
        seq=stored.seq,
        turn_index=stored.turn_index,
        is_collected=stored.is_collected,
        status=stored.status,
        create_time=_time(stored, "create_time"),
    )
    return cast(StoredMessage, out)


def create_session_request(
    user_id: str,
    scenario: str,
    host: str,
    title: str,
    metadata: Mapping[str, str] | None,
) -> spb.CreateSessionRequest:
    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping, not {_type_name(metadata)}")
    return spb.CreateSessionRequest(
        user_id=_ident(user_id, "user_id"),
        scenario=_text(scenario, "scenario"),
        host=_text(host, "host"),
        title=_text(title, "title"),
        metadata={
            _text(k, "metadata key"): _text(v, f"metadata[{k!r}]")
            for k, v in (metadata or {}).items()
        },
    )


def event_from_json(response: spb.ExportEventsResponse) -> SessionEvent:
    """One event of the log, decoded; a line that is not a JSON object is a server bug."""
    try:
        parsed = json.loads(response.json)
    except (ValueError, RecursionError) as error:
        raise InvalidResponseError(
            f"ExportEventsResponse.json is not valid JSON ({error})"
        ) from error
    if not isinstance(parsed, dict):
        raise InvalidResponseError("ExportEventsResponse.json is not a JSON object")
    return cast(SessionEvent, parsed)


def get_session_request(user_id: str, session_id: str) -> spb.GetSessionRequest:
    return spb.GetSessionRequest(
        user_id=_ident(user_id, "user_id"), session_id=_ident(session_id, "session_id")
    )


def list_messages_request(
    user_id: str, session_id: str, page_size: int, page_token: str = ""
) -> spb.ListMessagesRequest:
    return spb.ListMessagesRequest(
        user_id=_ident(user_id, "user_id"),
        session_id=_ident(session_id, "session_id"),
        page_size=_int(page_size, "page_size"),
        page_token=page_token,
    )


def export_events_request(user_id: str, session_id: str, after: int) -> spb.ExportEventsRequest:
    return spb.ExportEventsRequest(
        user_id=_ident(user_id, "user_id"),
        session_id=_ident(session_id, "session_id"),
        after=_int(after, "after"),
    )


def export_xml_request(user_id: str, session_id: str) -> spb.ExportEventsRequest:
    return spb.ExportEventsRequest(
        user_id=_ident(user_id, "user_id"),
        session_id=_ident(session_id, "session_id"),
        format=spb.EXPORT_FORMAT_XML,
    )


def end_session_request(user_id: str, session_id: str, mode: str) -> spb.EndSessionRequest:
    return spb.EndSessionRequest(
        user_id=_ident(user_id, "user_id"),
        session_id=_ident(session_id, "session_id"),
        mode=_text(mode, "mode"),
    )


# Memories ---------------------------------------------------------------------------


def memory_from_pb(memory: mpb.Memory) -> Memory:
    return {
        "id": memory.id,
        "user_id": memory.user_id,
        "content": memory.content,
        "source_session_id": memory.source_session_id,
        "source_message_id": memory.source_message_id,
        "create_time": _time(memory, "create_time"),
        "update_time": _time(memory, "update_time"),
        **memory_fields(memory),  # type: ignore[typeddict-item]
    }


def add_memory_request(
    user_id: str,
    content: str,
    source_session_id: str,
    source_message_id: str | int,
    details: Mapping[str, Any],
) -> mpb.AddMemoryRequest:
    """``details``: the keyword arguments of ``add_memory`` after the source."""
    return mpb.AddMemoryRequest(
        user_id=_ident(user_id, "user_id"),
        content=_text(content, "content"),
        source_session_id=_ident(source_session_id, "source_session_id"),
        source_message_id=_ident(source_message_id, "source_message_id"),
        **add_fields(**details),
    )


def added_memory(response: mpb.AddMemoryResponse) -> AddedMemory:
    """The memory, with ``created`` false when the user already had the same text."""
    return {**memory_from_pb(response.memory), "created": response.created}


def search_memories_request(
    user_id: str, query: str, limit: int, found_by: object, explain: object = False
) -> mpb.SearchMemoriesRequest:
    if not isinstance(explain, bool):
        raise TypeError(f"explain must be a bool, not {_type_name(explain)}")
    return mpb.SearchMemoriesRequest(
        user_id=_ident(user_id, "user_id"),
        query=_text(query, "query"),
        limit=_int(limit, "limit"),
        filter=memory_filter(found_by),
        explain=explain,
    )


def scored_memories(response: mpb.SearchMemoriesResponse) -> MemoryHits:
    found: list[ScoredMemory] = []
    for hit in response.results:
        # A cast: mypy does not see that ``explain`` may be left out of a ** literal.
        scored = cast(
            ScoredMemory,
            {
                **memory_from_pb(hit.memory),
                "score": hit.score,
                "relevance": hit.relevance,
                "recency": hit.recency,
            },
        )
        if hit.HasField("explain"):
            parts = hit.explain
            scored["explain"] = {
                "term_score": parts.term_score if parts.HasField("term_score") else None,
                "cosine": parts.cosine if parts.HasField("cosine") else None,
            }
        found.append(scored)
    return MemoryHits(found, response.note)


def list_memories_request(
    user_id: str, page_size: int, page_token: str, found_by: object
) -> mpb.ListMemoriesRequest:
    return mpb.ListMemoriesRequest(
        user_id=_ident(user_id, "user_id"),
        page_size=_int(page_size, "page_size"),
        page_token=page_token,
        filter=memory_filter(found_by),
    )


def delete_memory_request(user_id: str, memory_id: str | int) -> mpb.DeleteMemoryRequest:
    return mpb.DeleteMemoryRequest(
        user_id=_ident(user_id, "user_id"), memory_id=_ident(memory_id, "memory_id")
    )


# Users ------------------------------------------------------------------------------


def delete_user_request(user_id: str, confirm_user_id: str | None) -> upb.DeleteUserRequest:
    """``confirm_user_id`` None repeats ``user_id``: naming the user is the confirmation."""
    user = _ident(user_id, "user_id")
    confirm = user if confirm_user_id is None else _ident(confirm_user_id, "confirm_user_id")
    return upb.DeleteUserRequest(user_id=user, confirm_user_id=confirm)


def deleted_counts(response: upb.DeleteUserResponse) -> DeletedCounts:
    """How many of each DeleteUser deleted, by the response's field names."""
    return {
        "sessions": response.sessions,
        "messages": response.messages,
        "summaries": response.summaries,
        "memories": response.memories,
        "memory_history": response.memory_history,
        "event_logs": response.event_logs,
        "api_keys": response.api_keys,
    }


# Templates and skills ---------------------------------------------------------------


def template_from_pb(template: ppb.PromptTemplate) -> Template:
    return {
        "scenario": template.scenario,
        "system_prompt": template.system_prompt,
        "version": template.version,
        "enabled": template.enabled,
        "update_time": _time(template, "update_time"),
    }


def upsert_template_request(
    scenario: str, system_prompt: str, enabled: bool
) -> ppb.UpsertTemplateRequest:
    return ppb.UpsertTemplateRequest(
        scenario=_text(scenario, "scenario"),
        system_prompt=_text(system_prompt, "system_prompt"),
        disabled=not enabled,
    )


def skill_from_pb(skill: ppb.Skill) -> Skill:
    return {
        "name": skill.name,
        "description": skill.description,
        "prompt": skill.prompt,
        "apps": list(skill.apps),
        "enabled": skill.enabled,
        "update_time": _time(skill, "update_time"),
    }


def upsert_skill_request(
    name: str, prompt: str, description: str, apps: Sequence[str], enabled: bool
) -> ppb.UpsertSkillRequest:
    return ppb.UpsertSkillRequest(
        skill=ppb.Skill(
            name=_text(name, "name"),
            description=_text(description, "description"),
            prompt=_text(prompt, "prompt"),
            apps=_texts(apps, "apps"),
            enabled=bool(enabled),
        )
    )


def list_skills_request(app: str, enabled_only: bool) -> ppb.ListSkillsRequest:
    return ppb.ListSkillsRequest(app=_text(app, "app"), enabled_only=bool(enabled_only))

"""Stored records -> proto messages for the session, memory and prompt services."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp

from contextd.app.records import (
    Memory,
    PromptTemplate,
    ScoredMemory,
    Session,
    Skill,
    StoredMessage,
)
from contextd.fronts.grpc.convert import PublicIds, message_to_pb
from contextd.v1 import chat_pb2, memory_pb2, prompts_pb2, sessions_pb2


def timestamp(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1_000_000_000))
    return ts


def session_to_pb(s: Session) -> sessions_pb2.Session:
    return sessions_pb2.Session(
        id=s.id,
        user_id=s.user_id,
        scenario=s.scenario,
        host=s.host,
        title=s.title,
        metadata=s.metadata,
        create_time=timestamp(s.created_at),
        update_time=timestamp(s.updated_at),
        message_count=s.message_count,
    )


def stored_message_to_pb(
    m: StoredMessage, tokenizer: str, ids: PublicIds
) -> sessions_pb2.SessionMessage:
    message = message_to_pb(m.message, m.tokens.get(tokenizer, 0))
    message.id = ids.message(m.id)
    out = sessions_pb2.SessionMessage(
        message=message,
        session_id=m.session_id,
        seq=m.seq,
        turn_index=m.turn_index,
        is_collected=m.is_collected,
        status=m.status,
        create_time=timestamp(m.created_at),
    )
    if m.answer is not None:
        u = m.answer.usage
        out.answer.model = m.answer.model
        out.answer.note = m.answer.note
        out.answer.usage.CopyFrom(
            chat_pb2.TokenUsage(
                prompt_tokens=u.prompt_tokens,
                completion_tokens=u.completion_tokens,
                prompt_tokens_estimate=u.prompt_tokens_estimate,
                estimated=u.estimated,
                cache_read_tokens=u.cache_read_tokens,
                cache_write_tokens=u.cache_write_tokens,
            )
        )
    return out


def memory_to_pb(m: Memory, ids: PublicIds) -> memory_pb2.Memory:
    return memory_pb2.Memory(
        id=ids.memory(m.id),
        user_id=m.user_id,
        content=m.content,
        source_session_id=m.source_session_id,
        source_message_id=ids.message(m.source_message_id),
        create_time=timestamp(m.created_at),
        update_time=timestamp(m.updated_at),
        scope=memory_pb2.MemoryScope(agent=m.agent, app=m.app) if m.agent or m.app else None,
        metadata=m.metadata,
        valid_from=None if m.valid_from is None else timestamp(m.valid_from),
        valid_to=None if m.valid_to is None else timestamp(m.valid_to),
        expire_time=None if m.expires_at is None else timestamp(m.expires_at),
        superseded_by=ids.memory(m.superseded_by) if m.superseded_by else "",
    )


def scored_memory_to_pb(
    s: ScoredMemory, ids: PublicIds, explain: bool = False
) -> memory_pb2.ScoredMemory:
    scored = memory_pb2.ScoredMemory(
        memory=memory_to_pb(s.memory, ids), score=s.score, relevance=s.relevance, recency=s.recency
    )
    if explain:
        scored.explain.SetInParent()
        if s.term_score is not None:
            scored.explain.term_score = s.term_score
        if s.cosine is not None:
            scored.explain.cosine = s.cosine
    return scored


def template_to_pb(t: PromptTemplate) -> prompts_pb2.PromptTemplate:
    return prompts_pb2.PromptTemplate(
        scenario=t.scenario,
        system_prompt=t.system_prompt,
        version=t.version,
        enabled=t.enabled,
        update_time=timestamp(t.updated_at),
    )


def skill_to_pb(s: Skill) -> prompts_pb2.Skill:
    return prompts_pb2.Skill(
        name=s.name,
        description=s.description,
        prompt=s.prompt,
        apps=s.apps,
        enabled=s.enabled,
        update_time=timestamp(s.updated_at),
    )


def skill_from_pb(s: prompts_pb2.Skill) -> Skill:
    return Skill(
        name=s.name,
        description=s.description,
        prompt=s.prompt,
        apps=tuple(s.apps),
        enabled=s.enabled,
    )

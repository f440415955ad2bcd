"""Prompt caching through a live server: consecutive StreamChat turns of a session send
the fake providers a byte-identical prefix with the stable-prefix cache layout, the
Anthropic request carries its cache breakpoints, and BuildMessages reports the prefix."""

from __future__ import annotations

import json
from typing import Any

import grpc.aio
from contextd.app.session_context import MEMORY_HEADER, RECENT_HEADER
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc
from contextd.v1 import sessions_pb2 as spb

from tests.support.chat_live import (
    SISTER,
    Live,
    add_memories,
    completed,
    new_user,
    run_turn,
)
from tests.support.fakes import anthropic_sse as an
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.llm_server import Reply

STABLE, OFF = pb.CACHE_LAYOUT_STABLE_PREFIX, pb.CACHE_LAYOUT_OFF
EPHEMERAL = {"type": "ephemeral"}
QUESTIONS = ["Where does my sister Ana live?", "What does Ana do?", "Is Ana happy there?"]
ANSWERS = ["Ana lives in Lisbon.", "Ana teaches kayaking.", "Ana loves it there."]
KAYAK = "The user's sister Ana teaches kayaking in Lisbon"


def chat_request(user: str, text: str, session_id: str, layout: int) -> Any:
    session = pb.SessionContext(user_id=user, session_id=session_id, cache_layout=layout)
    return cpb.StreamChatRequest(session=session, user_message=text)


async def add_recent_session(live: Live, user: str, title: str, summary: str) -> None:
    created = await live.sessions.CreateSession(spb.CreateSessionRequest(user_id=user, title=title))
    await live.sessions.SetSessionSummary(
        spb.SetSessionSummaryRequest(user_id=user, session_id=created.session.id, summary=summary)
    )


async def three_turns(
    live: Live, layout: int, replies: list[Reply]
) -> tuple[str, str, list[Any], list[Any]]:
    """Three turns of one new session; a memory and a recent session are added before
    the third. Returns the user, the session, the turn_started context reports and the
    model calls the fake received (one per turn)."""
    fake = live.fake
    user = new_user()
    await add_memories(live, user, SISTER)
    await add_recent_session(live, user, "Trip", "Planned a trip to Porto")
    first = len(fake.requests)
    fake.script(*replies)
    session_id, reports = "", []
    for k, question in enumerate(QUESTIONS):
        if k == 2:
            await add_memories(live, user, KAYAK)
            await add_recent_session(live, user, "Books", "Picked three novels")
        events = await run_turn(live, chat_request(user, question, session_id, layout))
        completed(events)
        session_id = events[0].turn_started.session_id
        reports.append(events[0].turn_started.context)
    calls = fake.requests[first:]
    assert len(calls) == 3
    return user, session_id, reports, calls


def shared_prefix(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` have in common."""
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def openai_replies() -> list[Reply]:
    return [oa.text_reply([answer]) for answer in ANSWERS]


def anthropic_replies() -> list[Reply]:
    return [an.text_reply([answer]) for answer in ANSWERS]


async def test_openai_turns_share_the_system_layers_and_history(openai_live: Live) -> None:
    _, _, reports, calls = await three_turns(openai_live, STABLE, openai_replies())
    second, third = calls[1], calls[2]
    roles = [m["role"] for m in third.body["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "system", "user"]
    system, volatile = third.body["messages"][0]["content"], third.body["messages"][5]["content"]
    assert MEMORY_HEADER not in system and RECENT_HEADER not in system
    assert SISTER in volatile and KAYAK in volatile and "Picked three novels" in volatile
    # Byte for byte: the system layers and the history the second call had (its first
    # answer included) open the third call too.
    end_of_history = second.raw.index(json.dumps(ANSWERS[0])) + len(json.dumps(ANSWERS[0]))
    assert second.raw.index(json.dumps(system)) < end_of_history
    assert shared_prefix(second.raw, third.raw) >= end_of_history
    assert reports[2].cacheable_prefix_tokens > reports[1].cacheable_prefix_tokens > 0


async def test_openai_default_layout_breaks_at_the_memory_layer(openai_live: Live) -> None:
    _, _, reports, calls = await three_turns(openai_live, OFF, openai_replies())
    second, third = calls[1], calls[2]
    roles = [m["role"] for m in third.body["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    shared = shared_prefix(second.raw, third.raw)
    memory_at = second.raw.index(MEMORY_HEADER)
    assert memory_at < shared < second.raw.index(json.dumps(QUESTIONS[0]))
    assert [r.cacheable_prefix_tokens for r in reports] == [0, 0, 0]


async def test_anthropic_breakpoints_and_stable_prefix(anthropic_live: Live) -> None:
    _, _, reports, calls = await three_turns(anthropic_live, STABLE, anthropic_replies())
    second, third = calls[1].body, calls[2].body
    [system_block] = third["system"]
    assert set(system_block) == {"type", "text", "cache_control"}
    assert system_block["cache_control"] == EPHEMERAL
    assert MEMORY_HEADER not in system_block["text"]
    assert second["system"] == third["system"]
    volatile = third["messages"][-1]["content"][0]["text"]
    assert volatile.startswith(MEMORY_HEADER) and KAYAK in volatile
    assert third["messages"] == [
        {"role": "user", "content": [text(QUESTIONS[0])]},
        {"role": "assistant", "content": [text(ANSWERS[0])]},
        {"role": "user", "content": [text(QUESTIONS[1])]},
        {"role": "assistant", "content": [text(ANSWERS[1], cached=True)]},
        {"role": "user", "content": [text(volatile), text(QUESTIONS[2])]},
    ]
    # The second call marked the end of its history; the markers aside, the third
    # call starts with the same turns.
    assert second["messages"][:2] == [
        {"role": "user", "content": [text(QUESTIONS[0])]},
        {"role": "assistant", "content": [text(ANSWERS[0], cached=True)]},
    ]
    assert calls[2].raw.count('"cache_control"') == 2
    assert reports[2].cacheable_prefix_tokens > 0


async def test_anthropic_default_layout_has_no_markers(anthropic_live: Live) -> None:
    _, _, _, calls = await three_turns(anthropic_live, OFF, anthropic_replies())
    third = calls[2].body
    assert isinstance(third["system"], str) and MEMORY_HEADER in third["system"]
    assert "cache_control" not in calls[2].raw
    assert third["messages"][-1] == {"role": "user", "content": [text(QUESTIONS[2])]}


async def test_build_messages_reports_the_cacheable_prefix(anthropic_live: Live) -> None:
    live = anthropic_live
    user, session_id, _, _ = await three_turns(live, STABLE, anthropic_replies())
    async with grpc.aio.insecure_channel(live.proc.address) as channel:
        context = context_pb2_grpc.ContextServiceStub(channel)
        built = await context.BuildMessages(
            pb.BuildMessagesRequest(
                user_message="And Ana's kayak?",
                token_budget=8000,
                output_format=pb.OUTPUT_FORMAT_ANTHROPIC,
                session=pb.SessionContext(user_id=user, session_id=session_id, cache_layout=STABLE),
            )
        )
        messages = list(built.messages)
        roles = [m.role for m in messages]
        assert roles == [
            pb.ROLE_SYSTEM,
            *[pb.ROLE_USER, pb.ROLE_ASSISTANT] * 3,
            pb.ROLE_SYSTEM,
            pb.ROLE_USER,
        ]
        prefix = messages[:7]  # the system layers and the window
        counted = await context.CountTokens(
            pb.CountTokensRequest(tokenizer=built.report.tokenizer, messages=prefix)
        )
        report = built.report
        assert report.cacheable_prefix_tokens == counted.total_tokens
        assert report.cacheable_prefix_tokens == sum(m.tokens for m in prefix)
        assert report.total_tokens == sum(m.tokens for m in messages)
        names = [x.name for x in report.context_layers]
        assert names == [
            "system",
            "scenario",
            "session",
            "window",
            "memory",
            "recent_sessions",
            "user_message",
        ]
        layers = {x.name: x for x in report.context_layers}
        assert layers["memory"].items_kept == 2 and layers["recent_sessions"].items_kept == 2
        payload = json.loads(built.payload_json)
        assert payload["system"][0]["cache_control"] == EPHEMERAL
        assert payload["messages"][-2]["content"][-1]["cache_control"] == EPHEMERAL
        assert payload["messages"][-1]["content"][1] == text("And Ana's kayak?")

        default = await context.BuildMessages(
            pb.BuildMessagesRequest(
                user_message="And Ana's kayak?",
                token_budget=8000,
                session=pb.SessionContext(user_id=user, session_id=session_id),
            )
        )
        assert default.report.cacheable_prefix_tokens == 0
        assert [m.role for m in default.messages] == [pb.ROLE_SYSTEM, *roles[1:7], pb.ROLE_USER]
        assert default.messages[0].content == "\n\n".join(
            [messages[0].content, messages[7].content]
        )
        assert default.report.total_tokens <= report.total_tokens


def text(value: str, *, cached: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": value}
    if cached:
        block["cache_control"] = EPHEMERAL
    return block

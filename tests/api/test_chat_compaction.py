"""Compaction after a StreamChat turn, configured by the request: its trigger, what it
keeps verbatim, the summarizer's model and instructions, and the extract when the
summarizer fails or takes too long (the turn never fails for it). A contextd process of
its own, memory off, so that the compaction is the only work after a turn."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc

from tests.api.conftest import live_server
from tests.support.chat_live import Live, completed, eventually, new_user, openai_fake, run_turn
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.llm_server import JSONReply, StreamReply
from tests.support.status import violations

SUMMARY = "[Previous conversation summary]"


@pytest.fixture(scope="module")
async def live(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Live]:
    data_dir = tmp_path_factory.mktemp("chat-compaction")
    fake = openai_fake()
    async with live_server(
        data_dir, fake, "openai", "gpt-test", "", "--memory-enabled", "false"
    ) as live:
        yield live


@pytest.fixture
async def context(live: Live) -> AsyncIterator[context_pb2_grpc.ContextServiceStub]:
    async with grpc.aio.insecure_channel(live.proc.address) as channel:
        yield context_pb2_grpc.ContextServiceStub(channel)


def turn(user: str, sid: str, text: str, **compaction: Any) -> cpb.StreamChatRequest:
    return cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=sid),
        user_message=text,
        tokenizer="cl100k_base",
        compaction=cpb.CompactionOptions(**compaction) if compaction else None,
    )


async def talk(live: Live, user: str, turns: int, **compaction: Any) -> str:
    """``turns`` turns of a new session, each answered; the session."""
    live.fake.script(*[oa.text_reply([f"answer number {k} " * 5]) for k in range(turns)])
    sid = ""
    for k in range(turns):
        events = await run_turn(live, turn(user, sid, f"question number {k} " * 5, **compaction))
        assert completed(events).status == cpb.TURN_STATUS_OK
        sid = events[0].turn_started.session_id
    return sid


async def window(
    context: context_pb2_grpc.ContextServiceStub, user: str, sid: str
) -> pb.BuildMessagesResponse:
    response: pb.BuildMessagesResponse = await context.BuildMessages(
        pb.BuildMessagesRequest(
            session=pb.SessionContext(user_id=user, session_id=sid),
            user_message="next",
            token_budget=8000,
            tokenizer="cl100k_base",
        )
    )
    return response


async def compacted(
    context: context_pb2_grpc.ContextServiceStub, user: str, sid: str, kept: int
) -> pb.BuildMessagesResponse:
    """The session's window once the work after its last turn compacted it to ``kept``
    messages after the summary."""

    async def summarized() -> pb.BuildMessagesResponse | None:
        built = await window(context, user, sid)
        report = built.report
        return built if report.summary_included and report.history_kept == kept else None

    built = await eventually(summarized, within=10)
    assert built is not None, "no compaction"
    return built


async def test_the_summarizer_failing_leaves_an_extract(
    live: Live, context: context_pb2_grpc.ContextServiceStub
) -> None:
    live.fake.background = JSONReply(500, oa.error_body("down", "server_error"))
    user = new_user()
    sid = await talk(live, user, 4, trigger_tokens=60, keep_messages=2)
    built = await compacted(context, user, sid, 2)
    summary = built.messages[1].content
    assert summary.startswith(f"{SUMMARY}\n\n(extract, not a model summary: ")
    # The newest two messages stay verbatim; the summary starts at a user message.
    assert [m.role for m in built.messages[2:]] == [pb.ROLE_USER, pb.ROLE_ASSISTANT, pb.ROLE_USER]
    [edit] = built.report.edits
    assert edit.kind == pb.EDIT_KIND_COMPACTED and edit.tokens_after == built.messages[1].tokens


async def test_the_summarizer_timing_out_leaves_an_extract(
    live: Live, context: context_pb2_grpc.ContextServiceStub
) -> None:
    # A start of an answer, then nothing.
    live.fake.background = StreamReply(oa.text_frames(["never"])[:2], ending="hang")
    user = new_user()
    sid = await talk(live, user, 3, trigger_tokens=60, keep_messages=2, timeout_seconds=0.3)
    built = await compacted(context, user, sid, 2)
    assert "(extract, not a model summary: " in built.messages[1].content


async def test_the_summarizers_model_and_instructions(
    live: Live, context: context_pb2_grpc.ContextServiceStub
) -> None:
    live.fake.background = oa.text_reply(["The user asked numbered questions."])
    before = len(live.fake.background_requests)
    user = new_user()
    sid = await talk(
        live,
        user,
        3,
        trigger_tokens=60,
        keep_turns=1,
        model="summarizer-1",
        prompt="Summarize in one sentence.",
    )
    built = await compacted(context, user, sid, 2)
    assert built.messages[1].content == f"{SUMMARY}\n\nThe user asked numbered questions."
    # keep_turns=1: the newest turn's question and answer stay, then the new message.
    assert [m.role for m in built.messages[2:]] == [pb.ROLE_USER, pb.ROLE_ASSISTANT, pb.ROLE_USER]
    asked = [r.body for r in live.fake.background_requests[before:]]
    assert asked and all(body["model"] == "summarizer-1" for body in asked)
    for body in asked:
        assert body["messages"][0] == {"role": "system", "content": "Summarize in one sentence."}


async def test_under_the_trigger_or_off_nothing_is_compacted(
    live: Live, context: context_pb2_grpc.ContextServiceStub
) -> None:
    live.fake.background = oa.text_reply(["a summary"])
    user = new_user()
    quiet = await talk(live, user, 3, trigger_tokens=100_000, trigger_budget_share=0)
    off = await talk(live, user, 3, trigger_tokens=60, enabled=False)
    # The work after a later session's turns is done: theirs, queued before, is too.
    control = await talk(live, user, 3, trigger_tokens=60, keep_messages=2)
    await compacted(context, user, control, 2)
    for sid in (quiet, off):
        built = await window(context, user, sid)
        assert not built.report.summary_included and len(built.messages) == 8


async def test_a_tool_call_is_never_folded_without_its_results(
    live: Live, context: context_pb2_grpc.ContextServiceStub
) -> None:
    live.fake.background = JSONReply(500, oa.error_body("down", "server_error"))
    weather = cpb.ToolDefinition(name="get_weather")
    user = new_user()
    args = json.dumps({"city": "Paris"})
    live.fake.script(
        oa.text_reply(["hello there " * 10]),
        StreamReply(oa.tool_call_frames([("call_w", "get_weather", args)])),
        oa.text_reply(["sunny"]),
    )
    options = cpb.CompactionOptions(trigger_tokens=20, keep_messages=1)
    events = await run_turn(
        live,
        cpb.StreamChatRequest(
            session=pb.SessionContext(user_id=user),
            user_message="hi " * 10,
            compaction=options,
        ),
    )
    sid = events[0].turn_started.session_id
    second = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=sid),
        user_message="weather?",
        tools=[weather],
        compaction=options,
    )
    assert completed(await run_turn(live, second)).status == cpb.TURN_STATUS_REQUIRES_ACTION
    result = cpb.ToolResult(tool_call_id="call_w", content="sunny, 20 C")
    third = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=sid),
        tool_results=[result],
        tools=[weather],
        compaction=options,
    )
    assert completed(await run_turn(live, third)).status == cpb.TURN_STATUS_OK
    built = await compacted(context, user, sid, 4)
    # keep_messages=1 would keep the answer alone; the cut moves back to the user
    # message, so the call and its result stay together after it.
    assert [m.role for m in built.messages[2:-1]] == [
        pb.ROLE_USER,
        pb.ROLE_ASSISTANT,
        pb.ROLE_TOOL,
        pb.ROLE_ASSISTANT,
    ]


async def test_bad_compaction_is_named(live: Live) -> None:
    request = turn(
        new_user(),
        "",
        "hi",
        trigger_tokens=-1,
        trigger_budget_share=1.5,
        keep_messages=0,
        keep_turns=-1,
        prompt="x" * 4001,
        timeout_seconds=0,
    )
    with pytest.raises(grpc.RpcError) as raised:
        await run_turn(live, request)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert sorted(violations(raised.value)) == [
        "compaction.keep_messages",
        "compaction.keep_turns",
        "compaction.prompt",
        "compaction.timeout_seconds",
        "compaction.trigger_budget_share",
        "compaction.trigger_tokens",
    ]

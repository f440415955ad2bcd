"""A turn's build report is kept in its turn_start event (meta.context), so that the turn
can be shown later as the model saw it: the same figures StreamChat reported when the
turn started, dropped ranges at the stored messages' positions, and the memories the
memory layer put in with their scores."""

from __future__ import annotations

from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb

from tests.support.chat_live import (
    SISTER,
    Live,
    add_memories,
    completed,
    exported,
    new_user,
    request,
    run_turn,
)
from tests.support.fakes import openai_sse as oa

OLDER = 40
SUMMARY = "They talked about trains; 他们聊了火车。"


async def test_turn_start_keeps_the_build_report(openai_live: Live) -> None:
    live, user = openai_live, new_user()
    await add_memories(live, user, SISTER)
    created = await live.sessions.CreateSession(spb.CreateSessionRequest(user_id=user))
    sid = created.session.id
    older = [
        pb.Message(
            role=pb.ROLE_USER if i % 2 == 0 else pb.ROLE_ASSISTANT,
            content=f"older message {i} with some words in it",
        )
        for i in range(OLDER)
    ]
    appended = await live.sessions.AppendMessages(
        spb.AppendMessagesRequest(user_id=user, session_id=sid, messages=older)
    )
    # The newest four stand in a compression summary's place.
    replaced = [m.message.id for m in appended.messages[-4:]]
    await live.sessions.AddCompressionSummary(
        spb.AddCompressionSummaryRequest(
            user_id=user,
            session_id=sid,
            message_ids=replaced,
            start_message_id=replaced[0],
            summary=SUMMARY,
        )
    )
    live.fake.script(oa.text_reply(["She lives in Lisbon."]))
    events = await run_turn(
        live, request(user, "Where does my sister Ana live?", sid, token_budget=300)
    )
    assert completed(events).status
    started = events[0].turn_started
    report = started.context

    [start] = [e for e in await exported(live, user, sid) if e["type"] == "turn_start"]
    kept = start["meta"]["context"]
    assert kept["token_budget"] == report.token_budget == 300
    assert kept["total_tokens"] == report.total_tokens
    assert kept["history_kept"] == report.history_kept
    # The oldest messages, dropped for the budget, and the newest, compressed, at their
    # positions in the session; the summary's text as the model got it.
    reasons = {pb.DROP_REASON_BUDGET: "budget", pb.DROP_REASON_COMPRESSED: "compressed"}
    assert [(d["start_index"], d["count"], d["reason"]) for d in kept["dropped"]] == [
        (d.start_index, d.count, reasons[d.reason]) for d in report.dropped
    ]
    assert (kept["dropped"][0]["start_index"], kept["dropped"][0]["reason"]) == (0, "budget")
    assert kept["dropped"][-1] == {"start_index": OLDER - 4, "count": 4, "reason": "compressed"}
    assert kept["summary_included"] is True and kept["summary"] == SUMMARY
    assert [layer["name"] for layer in kept["context_layers"]] == [
        layer.name for layer in report.context_layers
    ]
    [memory] = kept["memories"]
    assert memory["content"] == SISTER and memory["score"] > 0


async def test_a_turn_without_memories_keeps_none(openai_live: Live) -> None:
    live, user = openai_live, new_user()
    live.fake.script(oa.text_reply(["Hello."]))
    events = await run_turn(live, request(user, "Hi"))
    sid = events[0].turn_started.session_id
    [start] = [e for e in await exported(live, user, sid) if e["type"] == "turn_start"]
    assert "memories" not in start["meta"]["context"]
    assert "summary" not in start["meta"]["context"]
    assert start["meta"]["context"]["dropped"] == []

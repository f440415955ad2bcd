"""StreamChat turns that end early, against a fake OpenAI server: a cancel or deadline
mid-stream, the host's new message instead of tool results, and provider errors."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import grpc.aio
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb

from tests.support.chat_live import (
    WEATHER,
    Live,
    check_event_shape,
    check_interrupted,
    completed,
    deltas,
    eventually,
    exported,
    kinds,
    new_user,
    request,
    run_turn,
    slow_text,
    stored,
    wait_disconnects,
    weather_call_reply,
    wire,
)
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.fakes.llm_server import (
    JSONReply,
    StreamReply,
    sse,
)

# -- cancel and deadline mid-stream ------------------------------------------


async def test_cancel_after_first_delta_closes_the_provider_stream(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    seen = len(fake.disconnects)
    fake.script(slow_text(["First part.", " Second", " third", " fourth"], 0.4))
    call = live.chat.StreamChat(request(user, "Tell me a long story"))
    got: list[Any] = []
    async for event in call:
        got.append(event)
        if event.WhichOneof("event") == "text_delta":
            cancelled_at = time.monotonic()
            call.cancel()
            break
    assert [d.text for d in deltas(got)] == ["First part."]
    gone = await wait_disconnects(fake, seen + 1, within=3)
    assert gone - cancelled_at < 1.5
    assert fake.disconnects[-1].frames_sent < len(oa.text_frames(["a"] * 4))
    sid = got[0].turn_started.session_id
    await check_interrupted(live, user, sid, "First part.", "cancelled")

    # The next turn on the session builds a valid context and completes.
    n = len(fake.requests)
    fake.script(oa.text_reply(["Short", " one."]))
    after = await run_turn(live, request(user, "Shorter please", sid))
    done = completed(after)
    assert done.status == cpb.TURN_STATUS_OK and done.final_text == "Short one."
    assert after[0].turn_started.turn_index == 2
    assert [wire(m) for m in fake.bodies()[n]["messages"][1:]] == [
        ("user", "Tell me a long story"),
        ("assistant", "First part."),
        ("user", "Shorter please"),
    ]


async def test_deadline_mid_stream_stores_like_a_cancel(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    seen = len(fake.disconnects)
    frames = oa.text_frames(["Partial", " answer"])
    frames = [frames[0], frames[1], sse(oa.chunk({"content": " late"}), delay=30)]
    fake.script(StreamReply(frames))
    got: list[Any] = []
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for event in live.chat.StreamChat(request(user, "Go on"), timeout=1.0):
            got.append(event)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert [d.text for d in deltas(got)] == ["Partial"]
    await wait_disconnects(fake, seen + 1, within=3)
    sid = got[0].turn_started.session_id
    await check_interrupted(live, user, sid, "Partial", "cancelled")


async def test_cancel_while_the_client_is_not_reading(openai_live: Live) -> None:
    """A client that stops reading blocks the server's writes; a cancel then closes the
    turn from its yield (GeneratorExit, not CancelledError)."""
    live, fake = openai_live, openai_live.fake
    user = new_user()
    seen = len(fake.disconnects)
    piece = "z" * 50_000
    fake.script(StreamReply(oa.text_frames([piece] * 400), frame_delay=0.002))
    call = live.chat.StreamChat(request(user, "Flood me"))
    got: list[Any] = []
    async for event in call:
        got.append(event)
        if event.WhichOneof("event") == "text_delta":
            break
    await asyncio.sleep(0.8)  # the windows fill up; the server waits to write
    assert len(fake.disconnects) == seen
    call.cancel()
    await wait_disconnects(fake, seen + 1, within=3)
    sid = got[0].turn_started.session_id

    async def partial() -> Any:
        messages = await stored(live, user, sid)
        return messages if len(messages) == 2 else None

    messages = await eventually(partial)
    assert messages and messages[1].status == "cancelled"
    assert len(messages[1].message.content) >= len(piece)

    async def ended() -> Any:
        events = await exported(live, user, sid)
        return events if events[-1]["type"] == "turn_end" else None

    events = await eventually(ended)
    assert events and events[-1]["meta"]["status"] == "cancelled"


async def test_new_message_instead_of_tool_results(openai_live: Live) -> None:
    """The host may drop pending calls: the unanswered call is not sent to the model."""
    live, fake = openai_live, openai_live.fake
    user = new_user()
    n = len(fake.requests)
    fake.script(weather_call_reply("call_w9"), oa.text_reply(["Sure."]))
    first = await run_turn(live, request(user, "Weather?", tools=[WEATHER]))
    assert completed(first).status == cpb.TURN_STATUS_REQUIRES_ACTION
    sid = first[0].turn_started.session_id
    second = await run_turn(live, request(user, "Never mind, say hi", sid, tools=[WEATHER]))
    assert completed(second).status == cpb.TURN_STATUS_OK
    assert second[0].turn_started.turn_index == 2
    sent = fake.bodies()[n + 1]["messages"]
    assert not any(m.get("tool_calls") for m in sent)
    assert wire(sent[-1]) == ("user", "Never mind, say hi")
    # The dropped call can no longer be answered.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await run_turn(
            live,
            request(
                user,
                session_id=sid,
                tool_results=[cpb.ToolResult(tool_call_id="call_w9", content="late")],
            ),
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# -- provider errors ----------------------------------------------------------


async def test_rejected_key_ends_the_turn_with_a_clean_error(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    fake.script(
        JSONReply(
            401,
            oa.error_body(
                f"Incorrect API key provided: {FAKE_KEY}.",
                "invalid_request_error",
                "invalid_api_key",
            ),
        )
    )
    events = await run_turn(live, request(user, "hello"))
    assert kinds(events) == ["turn_started", "turn_completed"]
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_ERROR
    assert "401" in done.error_message and "openai" in done.error_message
    assert FAKE_KEY not in done.error_message
    assert done.assistant_message_id == "" and done.final_text == ""
    sid = events[0].turn_started.session_id
    log = await exported(live, user, sid)
    check_event_shape(log, sid)
    assert log[-1]["meta"]["status"] == "error"
    assert FAKE_KEY not in live.history_file(sid).read_text(encoding="utf-8")
    assert [m.message.role for m in await stored(live, user, sid)] == [pb.ROLE_USER]


async def test_rate_limit_error_names_the_retry_delay(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    n = len(fake.requests)
    fake.script(
        JSONReply(
            429,
            oa.error_body("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
            headers={"Retry-After": "7"},
        )
    )
    done = completed(await run_turn(live, request(user, "hello")))
    assert len(fake.requests) == n + 1  # not retried inside the turn
    assert done.status == cpb.TURN_STATUS_ERROR
    assert "429" in done.error_message
    assert "retry after 7" in done.error_message.lower(), done.error_message


async def test_broken_stream_keeps_the_partial_answer(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    frames = oa.text_frames(["Half an ", "answer"])[:3]  # role, two pieces, no finish
    fake.script(StreamReply(frames, ending="abort"))
    events = await run_turn(live, request(user, "hello"))
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_ERROR and done.error_message
    assert [d.text for d in deltas(events)] == ["Half an ", "answer"]
    assert done.final_text == "Half an answer" and done.assistant_message_id
    sid = events[0].turn_started.session_id
    messages = await stored(live, user, sid)
    assert [(m.message.role, m.message.content, m.status) for m in messages] == [
        (pb.ROLE_USER, "hello", ""),
        (pb.ROLE_ASSISTANT, "Half an answer", "error"),
    ]
    assert messages[1].message.id == done.assistant_message_id
    log = await exported(live, user, sid)
    check_event_shape(log, sid)
    assert log[-1]["meta"]["status"] == "error"
    assert log[-1]["meta"]["errorMessage"] == done.error_message


async def test_error_in_a_later_step_stores_only_that_steps_text(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    look = StreamReply(
        oa.tool_call_frames(
            [("call_m2", "memory_search", '{"query": "x"}')], text_before="Let me look. "
        )
    )
    broken = StreamReply(oa.text_frames(["Half"])[:2], ending="abort")
    fake.script(look, broken)
    events = await run_turn(live, request(user, "hello"))
    done = completed(events)
    assert done.status == cpb.TURN_STATUS_ERROR
    assert [(d.step, d.text) for d in deltas(events)] == [(0, "Let me look. "), (1, "Half")]
    sid = events[0].turn_started.session_id
    messages = await stored(live, user, sid)
    assert [(m.message.role, m.message.content, m.status) for m in messages] == [
        (pb.ROLE_USER, "hello", ""),
        (pb.ROLE_ASSISTANT, "Let me look. ", ""),
        (pb.ROLE_TOOL, "(nothing found)", ""),
        (pb.ROLE_ASSISTANT, "Half", "error"),
    ]
    log = await exported(live, user, sid)
    check_event_shape(log, sid)
    end = log[-1]
    assert end["meta"]["status"] == "error" and end["meta"]["stepCount"] == 2
    # The failed step's prompt was sent: it counts.
    assert done.turn_usage.prompt_tokens_estimate > done.step_usage.prompt_tokens_estimate > 0
    # The next turn's context is valid.
    fake.script(oa.text_reply(["ok"]))
    assert completed(await run_turn(live, request(user, "again", sid))).status == (
        cpb.TURN_STATUS_OK
    )

"""A session's start and end in its event log (StreamChat's mode, EndSession), and the
XML history export, through a real contextd process on each engine."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import grpc
import grpc.aio
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as ctx
from contextd.v1 import sessions_pb2 as spb

from tests.support.chat_live import (
    Live,
    check_event_shape,
    completed,
    exported,
    new_user,
    request,
    run_turn,
    weather_call_reply,
)
from tests.support.fakes import openai_sse as oa
from tests.support.status import violations

pytestmark = pytest.mark.both_backends


async def turn(live: Live, user: str, text: str, session_id: str = "", **extra: Any) -> str:
    live.fake.script(oa.text_reply([f"re: {text}"], usage=(10, 2)))
    events = await run_turn(live, request(user, text, session_id, **extra))
    assert completed(events).status == 1  # TURN_STATUS_OK
    return str(events[0].turn_started.session_id)


async def end(live: Live, user: str, session_id: str, mode: str = "") -> bool:
    response = await live.sessions.EndSession(
        spb.EndSessionRequest(user_id=user, session_id=session_id, mode=mode)
    )
    return bool(response.ended)


async def test_end_session_writes_session_end_once_and_a_turn_reopens(openai_live: Live) -> None:
    live, user = openai_live, new_user()
    sid = await turn(live, user, "hello", mode="interactive")
    assert await end(live, user, sid, "interactive") is True
    assert await end(live, user, sid, "interactive") is False  # nothing more written
    await turn(live, user, "again", sid, mode="Excel add-in")
    assert await end(live, user, sid) is True

    events = await exported(live, user, sid)
    check_event_shape(events, sid)
    types = [e["type"] for e in events]
    assert types == [
        "session_start",
        *("turn_start", "assistant", "final", "turn_end"),
        "session_end",
        "session_start",
        *("turn_start", "assistant", "final", "turn_end"),
        "session_end",
    ]
    starts = [e["meta"] for e in events if e["type"] == "session_start"]
    assert [m["mode"] for m in starts] == ["interactive", "Excel add-in"]
    ends = [e for e in events if e["type"] == "session_end"]
    assert all("turn" not in e for e in ends)
    assert ends[0]["meta"] == {
        "mode": "interactive",
        "provider": "openai",
        "scenario": "",
        "host": "",
        "title": "",
        "metadata": {},
    }
    assert ends[1]["meta"]["mode"] == "session"  # the default


async def test_default_modes_and_a_session_never_chatted(openai_live: Live) -> None:
    live, user = openai_live, new_user()
    sid = await turn(live, user, "hello")
    assert (await exported(live, user, sid))[0]["meta"]["mode"] == "session"

    created = await live.sessions.CreateSession(
        spb.CreateSessionRequest(user_id=user, scenario="notes", host="Word", title="t")
    )
    other = created.session.id
    assert await end(live, user, other, "once") is True
    [ended] = await exported(live, user, other)
    assert ended["type"] == "session_end"
    assert ended["meta"]["host"] == "Word" and ended["meta"]["scenario"] == "notes"


async def test_a_session_of_appended_messages_starts_at_its_first_turn(openai_live: Live) -> None:
    live, user = openai_live, new_user()
    created = await live.sessions.CreateSession(spb.CreateSessionRequest(user_id=user))
    sid = created.session.id
    await live.sessions.AppendMessages(
        spb.AppendMessagesRequest(
            user_id=user,
            session_id=sid,
            messages=[
                ctx.Message(role=ctx.ROLE_USER, content="run elsewhere"),
                ctx.Message(role=ctx.ROLE_ASSISTANT, content="answered elsewhere"),
            ],
        )
    )
    await turn(live, user, "and here?", sid, mode="taskpane")
    assert await end(live, user, sid, "taskpane") is True
    events = await exported(live, user, sid)
    assert [e["type"] for e in events] == [
        "session_start",
        *("turn_start", "assistant", "final", "turn_end"),
        "session_end",
    ]
    assert events[0]["meta"]["mode"] == "taskpane"


async def test_session_start_says_the_configuration(openai_live: Live) -> None:
    # The specification's session_start: mode and config (model, temperature, tool
    # switches, tokenizer).
    live, user = openai_live, new_user()
    tools = [cpb.ToolDefinition(name="get_weather", description="weather")]
    model = cpb.ModelOptions(model="gpt-test", temperature=0.7)
    sid = await turn(live, user, "hello", mode="once", tools=tools, model=model)
    await turn(live, user, "more", sid, tool_protocol=cpb.TOOL_PROTOCOL_REACT)
    assert await end(live, user, sid) is True
    edited = cpb.StreamChatRequest(
        session=ctx.SessionContext(user_id=user),
        user_message="edit",
        tokenizer="estimate",
        tool_protocol=cpb.TOOL_PROTOCOL_REACT,
        editing=ctx.ContextEditing(tool_result_cap_tokens=100),
    )
    live.fake.script(oa.text_reply(["ok"], usage=(10, 2)))
    react_sid = completed_session(await run_turn(live, edited))
    live.fake.script(oa.text_reply(["ok"], usage=(10, 2)))
    native = await run_turn(live, request(user, "edit", editing=edited.editing))
    native_sid = completed_session(native)

    starts = [e["meta"] for e in await exported(live, user, sid) if e["type"] == "session_start"]
    assert starts[0] == {
        "mode": "once",
        "provider": "openai",
        "model": "gpt-test",
        "tokenizer": "cl100k_base",
        "temperature": 0.7,
        "tool_protocol": "native",
        "tools": ["get_weather", "memory_search"],
    }
    # One session_start per session: the second turn's settings are not logged again.
    assert len(starts) == 1
    [react] = [e["meta"] for e in await exported(live, user, react_sid)][:1]
    assert react["tool_protocol"] == "react" and react["tokenizer"] == "estimate"
    assert react["tools"] == ["memory_search"] and "temperature" not in react
    [started] = [e["meta"] for e in await exported(live, user, native_sid)][:1]
    assert started["tools"] == ["memory_search", "recall_tool_result"]


def completed_session(events: list[Any]) -> str:
    assert completed(events).status == 1  # TURN_STATUS_OK
    return str(events[0].turn_started.session_id)


async def test_a_tool_result_after_the_end_reopens_the_session(openai_live: Live) -> None:
    live, user = openai_live, new_user()
    live.fake.script(weather_call_reply())
    tools = [{"name": "get_weather", "description": "weather"}]
    first = await run_turn(
        live, request(user, "weather?", tools=[cpb.ToolDefinition(**t) for t in tools])
    )
    sid = first[0].turn_started.session_id
    assert await end(live, user, sid, "once") is True
    live.fake.script(oa.text_reply(["sunny"], usage=(10, 2)))
    await run_turn(
        live,
        request(user, "", sid, tool_results=[cpb.ToolResult(tool_call_id="call_w1", content="ok")]),
    )
    types = [e["type"] for e in await exported(live, user, sid)]
    assert types.count("session_start") == 2
    assert types.index("session_end") < len(types) - 1 - types[::-1].index("session_start")


@pytest.mark.parametrize("mode", ["x" * 65, "tab\there", "   ", "line\nbreak"])
async def test_a_bad_mode_is_refused(openai_live: Live, mode: str) -> None:
    live, user = openai_live, new_user()
    sid = await turn(live, user, "hello")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await run_turn(live, request(user, "more", sid, mode=mode))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violations(refused.value) == ["mode"]
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await end(live, user, sid, mode)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violations(refused.value) == ["mode"]
    assert "session_end" not in [e["type"] for e in await exported(live, user, sid)]


async def test_end_session_checks_the_owner(openai_live: Live) -> None:
    live, user = openai_live, new_user()
    sid = await turn(live, user, "hello")
    for who, session_id, code in (
        (new_user(), sid, grpc.StatusCode.NOT_FOUND),
        (user, "0" * 32, grpc.StatusCode.NOT_FOUND),
        (user, "", grpc.StatusCode.INVALID_ARGUMENT),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await end(live, who, session_id)
        assert refused.value.code() == code
    assert "session_end" not in [e["type"] for e in await exported(live, user, sid)]


async def xml_pieces(live: Live, user: str, session_id: str, after: int = 0) -> list[Any]:
    call = live.sessions.ExportEvents(
        spb.ExportEventsRequest(
            user_id=user, session_id=session_id, format=spb.EXPORT_FORMAT_XML, after=after
        )
    )
    return [piece async for piece in call]


async def test_the_xml_history_has_one_element_per_turn_with_its_steps(openai_live: Live) -> None:
    live, user = openai_live, new_user()
    tricky = "a < b && c > \"d\" ]]> 'e'\r\nnext\tline \x01 end 汉字 🙂"
    sid = await turn(live, user, tricky, mode="interactive")
    await turn(live, user, "second", sid)
    assert await end(live, user, sid, "interactive")

    pieces = await xml_pieces(live, user, sid)
    assert [p.type for p in pieces] == [
        "head",
        "session_start",
        "turn",
        "turn",
        "session_end",
        "tail",
    ]
    assert all(not p.json for p in pieces)
    root = ET.fromstring("".join(p.xml for p in pieces).encode("utf-8"))
    assert root.tag == "history" and root.get("session_id") == sid
    assert [child.tag for child in root] == [
        "session_start",
        "turn",
        "turn",
        "session_end",
    ]
    start = root[0]
    assert start.get("ts", "").endswith("Z")
    assert {m.get("name"): m.text for m in start.findall("meta")}["mode"] == "interactive"
    first = root[1]
    assert first.get("index") == "1" and root[2].get("index") == "2"
    assert [child.tag for child in first] == ["turn_start", "step", "turn_end"]
    question = first.find("turn_start/content")
    assert question is not None
    # Escaped and given back as sent; a character XML cannot carry becomes U+FFFD.
    assert question.text == tricky.replace("\x01", "\ufffd")
    step = first.find("step")
    assert step is not None and step.get("index") == "0"
    assert [child.tag for child in step] == ["assistant", "final"]
    assert step[0].get("role") == "assistant"
    answer = first.find("step/final/content")
    assert answer is not None and answer.text == f"re: {tricky}".replace("\x01", "\ufffd")
    tokens = {m.get("name"): m.text for m in first.findall("turn_end/meta")}
    assert tokens["status"] == "ok" and tokens["tokens"] is not None
    assert tokens["tokens"].startswith("{")


async def test_the_xml_history_of_an_empty_log_and_refusals(openai_live: Live) -> None:
    live, user = openai_live, new_user()
    created = await live.sessions.CreateSession(spb.CreateSessionRequest(user_id=user))
    sid = created.session.id
    pieces = await xml_pieces(live, user, sid)
    assert [p.type for p in pieces] == ["head", "tail"]
    root = ET.fromstring("".join(p.xml for p in pieces).encode("utf-8"))
    assert root.tag == "history" and len(root) == 0

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await xml_pieces(live, user, sid, after=1)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violations(refused.value) == ["after"]
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await xml_pieces(live, new_user(), sid)
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND

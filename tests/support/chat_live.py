"""Talking to a live contextd chat server wired to a fake OpenAI / Anthropic server."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from contextd.app.session_context import MEMORY_HEADER
from contextd.store.event_log.events import HISTORY_DIR
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

from tests.support.fakes import anthropic_sse as an
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.llm_server import (
    FakeLLMServer,
    RecordedRequest,
    Reply,
    StreamReply,
)
from tests.support.server import ServerProcess

WEATHER = cpb.ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    parameters_json=json.dumps(
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    ),
)


# The flood test stores a long partial answer; ListMessages must be able to return it.
BIG = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]


def offers_memory_search(body: object) -> bool:
    """A chat turn's model call: it always offers the server-side memory_search tool."""
    tools = body.get("tools") if isinstance(body, dict) else None
    names = [t.get("name") or t.get("function", {}).get("name") for t in tools or []]
    return "memory_search" in names


class ChatFake(FakeLLMServer):
    """The scripted replies go to chat turns only.

    After an ok turn the server calls the same provider in the background (memories,
    summaries); those calls would take the replies scripted for the next turn. They get
    ``background`` instead and are kept in ``background_requests``, out of ``requests``.
    """

    def __init__(self, background: Reply, *, base_path: str = "") -> None:
        super().__init__(base_path=base_path)
        self.background = background
        self.background_requests: list[RecordedRequest] = []

    def _next_reply(self) -> Reply:
        if not offers_memory_search(self.requests[-1].body):
            self.background_requests.append(self.requests.pop())
            return self.background
        return super()._next_reply()


def openai_fake() -> ChatFake:
    return ChatFake(oa.text_reply(['{"facts": []}']), base_path="/v1")


def anthropic_fake() -> ChatFake:
    return ChatFake(an.text_reply(['{"facts": []}']))


@dataclass
class Live:
    """A contextd process wired to a fake provider, and stubs for it."""

    fake: ChatFake
    proc: ServerProcess
    chat: Any
    sessions: Any
    memories: Any
    database_url: str = ""  # the server's PostgreSQL database; "" for SQLite

    def history_file(self, session_id: str) -> Path:
        return self.proc.data_dir / HISTORY_DIR / f"{session_id}.jsonl"

    async def history_lines(self, session_id: str) -> list[str]:
        """The session's event log as stored: the file's lines, or the table's rows."""
        if not self.database_url:
            return self.history_file(session_id).read_text(encoding="utf-8").splitlines()
        conn = await asyncpg.connect(self.database_url)
        try:
            rows = await conn.fetch(
                "SELECT data FROM event_lines WHERE session_id = $1 ORDER BY line", session_id
            )
        finally:
            await conn.close()
        return [str(row[0]) for row in rows]


def new_user() -> str:
    return f"u-{uuid.uuid4().hex[:8]}"


def request(user: str, text: str = "", session_id: str = "", **extra: Any) -> Any:
    return cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=session_id), user_message=text, **extra
    )


async def run_turn(live: Live, req: Any, **call: Any) -> list[Any]:
    return [event async for event in live.chat.StreamChat(req, **call)]


def kinds(events: list[Any]) -> list[str]:
    return [e.WhichOneof("event") for e in events]


def deltas(events: list[Any]) -> list[Any]:
    return [e.text_delta for e in events if e.WhichOneof("event") == "text_delta"]


def completed(events: list[Any]) -> Any:
    assert kinds(events)[-1] == "turn_completed", kinds(events)
    return events[-1].turn_completed


async def stored(live: Live, user: str, session_id: str) -> list[Any]:
    page = await live.sessions.ListMessages(
        spb.ListMessagesRequest(user_id=user, session_id=session_id, page_size=500)
    )
    return list(page.messages)


async def exported(live: Live, user: str, session_id: str) -> list[dict[str, Any]]:
    call = live.sessions.ExportEvents(spb.ExportEventsRequest(user_id=user, session_id=session_id))
    return [json.loads(e.json) async for e in call]


async def eventually(check: Callable[[], Any], within: float = 3.0) -> Any:
    """Polls an async check until it returns a truthy value."""
    deadline = time.monotonic() + within
    while True:
        value = await check()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.05)


def wire(message: dict[str, Any]) -> tuple[str, str]:
    """(role, text) of a request message, whatever shape its content has."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(block.get("text", "") for block in content if isinstance(block, dict))
    return message["role"], content or ""


def system_text(body: dict[str, Any]) -> str:
    [system] = [m for m in body["messages"] if m["role"] == "system"]
    return wire(system)[1]


def memory_lines(body: dict[str, Any]) -> list[str]:
    """The memory layer's items in a model call's system message."""
    system = system_text(body)
    if MEMORY_HEADER not in system:
        return []
    section = system.split(MEMORY_HEADER, 1)[1].split("\n\n", 1)[0]
    return [line for line in section.splitlines() if line]


SISTER = "The user's sister Ana lives in Lisbon"


async def add_memories(live: Live, user: str, *contents: str) -> None:
    for content in contents:
        added = await live.memories.AddMemory(mpb.AddMemoryRequest(user_id=user, content=content))
        assert added.created


EVENT_KEYS = ["ts", "session_id", "turn", "step", "type", "content", "role", "meta"]


# The events of one model call or its tool use: each names its step.
STEP_EVENTS = {"assistant", "action", "observation", "final"}


# meta.tokens of a step, a turn: the cache counts and ``estimated`` only when they say
# something.
TOKEN_KEYS = {"prompt", "completion", "total", "cacheRead", "cacheWrite", "estimated"}


def check_event_shape(events: list[dict[str, Any]], session_id: str) -> None:
    """Every line has the event log's fields, in their order, with their types."""
    for e in events:
        assert [k for k in EVENT_KEYS if k in e] == list(e), f"keys out of order: {e}"
        assert e["session_id"] == session_id
        assert isinstance(e["ts"], str) and e["ts"].endswith("Z")
        assert e["type"] in {
            "session_start",
            "turn_start",
            "assistant",
            "action",
            "observation",
            "final",
            "turn_end",
            "session_end",
        }
        if e["type"] not in ("session_start", "session_end"):
            assert isinstance(e["turn"], int) and e["turn"] >= 1
        if e["type"] in STEP_EVENTS:
            assert "step" in e, f"a step event without its step: {e}"
        if "step" in e:
            assert isinstance(e["step"], int) and e["step"] >= 0
        if "role" in e:
            assert e["role"] in {"system", "user", "assistant"}
        if "content" in e:
            assert isinstance(e["content"], str)
        tokens = e.get("meta", {}).get("tokens")
        if tokens is not None and e["type"] != "turn_start":
            assert {"prompt", "completion", "total"} <= set(tokens) <= TOKEN_KEYS, e
            assert tokens["total"] == tokens["prompt"] + tokens["completion"]
            assert tokens.get("estimated", True) is True, "only an estimated usage says so"
            assert all(tokens.get(k, 1) > 0 for k in ("cacheRead", "cacheWrite")), e
        if e["type"] == "turn_end":
            meta = e["meta"]
            assert {"status", "stepCount", "durationMs", "tokens"} <= set(meta)
            assert isinstance(meta["durationMs"], int) and meta["durationMs"] >= 0


WEATHER_ARGS = '{"city": "Paris", "unit": "celsius"}'


def weather_call_reply(call_id: str = "call_w1") -> StreamReply:
    return StreamReply(
        oa.tool_call_frames([(call_id, "get_weather", WEATHER_ARGS)], pieces=6, usage=(40, 25))
    )


def memory_call_reply(query: str, call_id: str = "call_m1") -> StreamReply:
    args = json.dumps({"query": query})
    return StreamReply(oa.tool_call_frames([(call_id, "memory_search", args)], usage=(30, 9)))


def slow_text(pieces: list[str], delay: float) -> StreamReply:
    frames = oa.text_frames(pieces)
    return StreamReply(frames, frame_delay=delay)


async def wait_disconnects(fake: FakeLLMServer, count: int, within: float) -> float:
    deadline = time.monotonic() + within
    while len(fake.disconnects) < count:
        assert time.monotonic() < deadline, "the provider stream was not closed"
        await asyncio.sleep(0.01)
    return fake.disconnects[count - 1].at


async def check_interrupted(live: Live, user: str, sid: str, text: str, status: str) -> None:
    async def partial() -> Any:
        messages = await stored(live, user, sid)
        return messages if len(messages) == 2 else None

    messages = await eventually(partial)
    assert messages, "the partial answer was not stored"
    assert [(m.message.role, m.status) for m in messages] == [
        (pb.ROLE_USER, ""),
        (pb.ROLE_ASSISTANT, status),
    ]
    assert messages[1].message.content == text

    async def ended() -> Any:
        events = await exported(live, user, sid)
        return events if events and events[-1]["type"] == "turn_end" else None

    events = await eventually(ended)
    assert events, "no turn_end in the event log"
    check_event_shape(events, sid)
    assert events[-1]["meta"]["status"] == status
    assert [e["type"] for e in events] == ["session_start", "turn_start", "turn_end"]
    # The interrupted call's prompt was sent: the turn counts it, the user's input
    # (turn_start's figure) and more.
    assert events[-1]["meta"]["tokens"]["prompt"] > events[1]["meta"]["tokens"]["prompt"] > 0

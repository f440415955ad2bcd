"""The two tool protocols of a chat turn read a step's output the same three ways: a
final answer, a host action, or tools answered within the turn. Pure reading: no store,
no model."""

from __future__ import annotations

from collections.abc import Sequence

from contextd.app.chat.inline_tools import MEMORY_TOOL, MemorySearch
from contextd.app.chat.native_tools import NativeTools
from contextd.app.chat.react_tags import ReactAddendum, ReactTags
from contextd.app.chat.request import ChatTurnRequest
from contextd.app.chat.step_context import StepContexts
from contextd.app.chat.tool_protocol import FinalAnswer, HostAction, InlineAction, TurnParts
from contextd.app.chat.turn import Turn
from contextd.app.scope import Caller
from contextd.core import react
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.tokens import TokenizerRegistry
from contextd.providers.base import ToolSpec
from contextd.store.models import Session, StoredMessage

WEATHER = ToolSpec("get_weather", "Current weather for a city", {"type": "object"})
TOKENIZER = TokenizerRegistry("cl100k_base").get("cl100k_base")


def request(react_tags: bool) -> ChatTurnRequest:
    return ChatTurnRequest(Caller("alice"), "", "hi", TOKENIZER, tools=[WEATHER], react=react_tags)


def parts(req: ChatTurnRequest, reserved_tokens: int = 0) -> TurnParts:
    # Reading a step stores and logs nothing: no repositories, no recorder, no log.
    t = Turn(Session("s1", "alice"), 1, "alice", TOKENIZER, "hi")
    contexts = StepContexts(None, 8000, req, t, reserved_tokens)  # type: ignore[arg-type]
    memory = MemorySearch(None, t, None)  # type: ignore[arg-type]
    return TurnParts(t, None, None, contexts, memory)  # type: ignore[arg-type]


def native() -> NativeTools:
    req = request(False)
    return NativeTools(req, parts(req))


def react_tags() -> ReactTags:
    req = request(True)
    addendum = ReactAddendum.for_request(req)
    return ReactTags(req, parts(req, addendum.tokens), addendum)


def call(call_id: str, name: str) -> ToolCall:
    return ToolCall(call_id, name, '{"query": "tea"}')


def stored(seq: int, message: ChatMessage, status: str = "") -> StoredMessage:
    return StoredMessage(seq + 10, "s1", "alice", seq, message, status=status)


def test_native_steps() -> None:
    tools = native()
    tools.turn.add_text("Looked it up. Tea.")
    # The answer reported is every step's text; the one stored, this step's.
    assert tools.read_step("Tea.", []) == FinalAnswer("Tea.", "Looked it up. Tea.")
    memory = [call("c1", MEMORY_TOOL.name)]
    assert tools.read_step("", memory) == InlineAction("", tuple(memory))
    both = [call("c1", MEMORY_TOOL.name), call("c2", WEATHER.name)]
    assert tools.read_step("x", both) == HostAction("x", tuple(both))


def test_react_steps() -> None:
    tools = react_tags()
    assert tools.read_step("<thought>t</thought><final>Tea.</final>", []) == FinalAnswer(
        "Tea.", "Tea."
    )
    assert tools.read_step("Just tea.", []) == FinalAnswer("Just tea.", "Just tea.")
    weather = '<action tool="get_weather">Paris</action>'
    assert tools.read_step(weather, []) == HostAction(weather, react.Action(WEATHER.name, "Paris"))
    for name in (MEMORY_TOOL.name, "no_such_tool"):
        text = f'<action tool="{name}">tea</action>'
        assert tools.read_step(text, []) == InlineAction(text, react.Action(name, "tea"))


def open_ids(recent: Sequence[StoredMessage], tools: NativeTools | ReactTags) -> list[str]:
    return list(tools.open_calls(recent))


def test_open_calls_of_native_answers() -> None:
    asked = ChatMessage(
        Role.ASSISTANT,
        "",
        (call("c1", MEMORY_TOOL.name), call("c2", WEATHER.name), call("c3", WEATHER.name)),
    )
    answered = ChatMessage(Role.TOOL, "sunny", tool_call_id="c2")
    user = ChatMessage(Role.USER, "hi")
    # Memory searches are never the host's; a call with a stored result is not open.
    assert open_ids([stored(0, user), stored(1, asked), stored(2, answered)], native()) == ["c3"]
    assert open_ids([stored(0, user)], native()) == []


def test_open_call_of_a_react_answer() -> None:
    tools = react_tags()
    acting = ChatMessage(Role.ASSISTANT, '<action tool="get_weather">Paris</action>')
    user = ChatMessage(Role.USER, "hi")
    # Named by its place in the session, not by its row number (11).
    assert open_ids([stored(0, user), stored(1, acting)], tools) == ["react_1"]
    # Not open once anything was stored after it, or when the answer broke off.
    assert open_ids([stored(0, acting), stored(1, user)], tools) == []
    assert open_ids([stored(0, user), stored(1, acting, "cancelled")], tools) == []
    searching = ChatMessage(Role.ASSISTANT, '<action tool="memory_search">tea</action>')
    assert open_ids([stored(0, user), stored(1, searching)], tools) == []

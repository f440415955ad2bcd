"""ChatApp's ReAct turns in-process (real SQLite file, the echo provider): what a turn
computes once, what each step's memory layer searches with, and how a host's own list
leaves room for the protocol addendum.

The echo provider quotes the last user message, so a user message (or a host's result)
holding an ``<action>`` tag makes the model's step that action."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from contextd.app.chat import (
    ChatEvent,
    ChatTurnRequest,
    TurnCompleted,
    TurnStarted,
    TurnStatus,
    UsageEvent,
)
from contextd.app.scope import Caller
from contextd.app.session_context import MEMORY_HEADER
from contextd.core import react
from contextd.core.build import build_messages
from contextd.core.build_request import BuildRequest
from contextd.core.errors import FailedPrecondition
from contextd.core.messages import ChatMessage, Role
from contextd.core.tokens import message_tokens
from contextd.providers.base import ModelRequest, ToolSpec

from tests.support.chat_app import in_process

WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
SISTER = "The user's sister Ana lives in Lisbon"
JACKET = "The user keeps a rain jacket for windy days"
QUESTION = "What should I pack to visit my sister?"


def started(events: Sequence[ChatEvent]) -> TurnStarted:
    first = events[0]
    assert isinstance(first, TurnStarted)
    return first


def completed(events: Sequence[ChatEvent]) -> TurnCompleted:
    last = events[-1]
    assert isinstance(last, TurnCompleted)
    return last


def memory_lines(request: ModelRequest) -> list[str]:
    """The memory layer's items in the request's system message."""
    system = request.messages[0]
    assert system.role is Role.SYSTEM
    if MEMORY_HEADER not in system.content:
        return []
    section = system.content.split(MEMORY_HEADER, 1)[1].split("\n\n", 1)[0]
    return [line for line in section.splitlines() if line]


async def test_the_addendum_is_made_once_per_turn_and_counted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []
    real = react.addendum

    def counting(tools: Sequence[react.ReactTool]) -> str:
        made.append(real(tools))
        return made[-1]

    monkeypatch.setattr(react, "addendum", counting)
    async with in_process(tmp_path) as app:
        # Two steps: the memory_search action, then the echoed observation (no tags).
        events = await app.turn(app.request('<action tool="memory_search">tea</action>'))
        assert completed(events).status is TurnStatus.OK
        assert len(app.provider.requests) == 2
        assert len(made) == 1
        [text] = made
        extra = app.tokenizer.count(text)
        start = started(events)
        assert start.prompt_tokens_estimate == start.context.total_tokens + extra
        # Every step sends the same addendum; the first step estimates what TurnStarted did.
        [first_usage, _] = [e.usage for e in events if isinstance(e, UsageEvent)]
        assert first_usage.prompt_tokens_estimate == start.prompt_tokens_estimate
        for request in app.provider.requests:
            assert request.messages[0].content.endswith("\n\n" + text)

        # A host tool's turn and the turn that goes on with its result: one each.
        action = app.request('<action tool="get_weather">Paris</action>', tools=[WEATHER])
        first = await app.turn(action)
        assert completed(first).status is TurnStatus.REQUIRES_ACTION
        [call] = completed(first).pending_tool_calls
        assert len(made) == 2
        again = app.request(
            session_id=started(first).session_id,
            tools=[WEATHER],
            tool_results=[(call.id, "sunny")],
        )
        assert completed(await app.turn(again)).status is TurnStatus.OK
        assert len(made) == 3
        assert made[1] == made[2] != made[0]  # the host's tool is listed


async def test_the_question_is_found_however_many_results_the_turn_has(
    tmp_path: Path,
) -> None:
    """A host can answer a turn's actions many times: the turn's first user message is
    read back past the newest messages' window."""
    async with in_process(tmp_path) as app:
        for content in (SISTER, JACKET):
            await app.memories.add("alice", content)
        question = f'{QUESTION} <action tool="get_weather">Lisbon</action>'
        acting = await app.turn(app.request(question, tools=[WEATHER]))
        assert completed(acting).status is TurnStatus.REQUIRES_ACTION
        sid = started(acting).session_id
        pending = completed(acting).pending_tool_calls
        # Each result holds the next action: the turn asks the host again, 40 times.
        again = '<action tool="get_weather">rain jacket</action>'
        for _ in range(40):
            [call] = pending
            events = await app.turn(
                app.request(session_id=sid, tools=[WEATHER], tool_results=[(call.id, again)])
            )
            assert completed(events).status is TurnStatus.REQUIRES_ACTION
            assert started(events).turn_index == started(acting).turn_index
            pending = completed(events).pending_tool_calls
        assert len(app.provider.requests) == 41
        for request in app.provider.requests:
            assert memory_lines(request) == [f"- {SISTER}"]


async def test_a_prebuilt_list_leaves_room_for_the_addendum(tmp_path: Path) -> None:
    """The host's own list is fitted to the budget less the addendum, or refused."""
    tips = " ".join(f"Tip {k}: roll the shirts, not fold them." for k in range(30))
    history = [ChatMessage(Role.USER, "How do I pack?"), ChatMessage(Role.ASSISTANT, tips)]
    async with in_process(tmp_path) as app:
        whole = build_messages(
            BuildRequest(
                user_message="Shoes?",
                token_budget=100_000,
                tokenizer=app.tokenizer,
                system_prompts=["Be brief."],
                history=history,
            )
        )
        budget = whole.report.total_tokens + 50  # the addendum is some 200 tokens

        def prebuilt(refuse: bool) -> ChatTurnRequest:
            return ChatTurnRequest(
                Caller("alice"),
                "",
                "Shoes?",
                app.tokenizer,
                messages=[ChatMessage(Role.SYSTEM, "Be brief."), *history],
                token_budget=budget,
                refuse_over_limit=refuse,
                react=True,
            )

        with pytest.raises(FailedPrecondition, match="with the ReAct instructions"):
            await app.turn(prebuilt(True))
        assert not app.provider.requests
        events = await app.turn(prebuilt(False))
        assert completed(events).status is TurnStatus.OK
        start = started(events)
        assert start.context.history_kept < len(history)
        [request] = app.provider.requests
        sent = sum(message_tokens(m, app.tokenizer) for m in request.messages)
        assert sent == request.prompt_tokens_estimate == start.prompt_tokens_estimate <= budget

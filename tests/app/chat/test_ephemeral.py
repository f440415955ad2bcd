"""An ephemeral turn's parts store nothing: its recorder keeps the turn's steps in memory
(no repository is touched: they are None here) and its usage is its own, its log writes
no line, and its contexts go on from the steps it kept."""

from __future__ import annotations

import asyncio

from contextd.app.chat.ephemeral import EphemeralRecorder
from contextd.app.chat.event_log import TurnLog
from contextd.app.chat.events import TurnStatus
from contextd.app.chat.request import ChatTurnRequest
from contextd.app.chat.step_context import StepContexts
from contextd.app.chat.turn import Turn
from contextd.app.chat.turn_end import TurnEnd
from contextd.app.scope import Caller
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.tokens import TokenizerRegistry
from contextd.providers.base import Usage
from contextd.store.models import Session

TOKENIZERS = TokenizerRegistry("cl100k_base")
TOKENIZER = TOKENIZERS.get("cl100k_base")
HOST = [ChatMessage(Role.SYSTEM, "You are terse.")]
RECALL = ToolCall("c1", "recall_tool_result", '{"tool_call_id": "t0"}')


def ephemeral() -> tuple[ChatTurnRequest, Turn, EphemeralRecorder]:
    req = ChatTurnRequest(Caller("alice"), "", "hi", TOKENIZER, messages=HOST, ephemeral=True)
    turn = Turn(Session("", "alice"), 1, "alice", TOKENIZER, "hi")
    end = TurnEnd(turn, TurnLog(None, "", "", 1))  # type: ignore[arg-type]
    # No repositories: any write would fail on None.
    return req, turn, EphemeralRecorder(turn, None, None, TOKENIZERS, end)  # type: ignore[arg-type]


def test_the_recorder_keeps_the_steps_and_stores_nothing() -> None:
    async def run() -> None:
        _, turn, record = ephemeral()
        record.begin_step(40)
        turn.add_text("Let me look.")
        turn.take_usage(Usage(prompt_tokens=42, completion_tokens=5), [RECALL])
        record.end_step([RECALL])
        step = ChatMessage(Role.ASSISTANT, "Let me look.", (RECALL,))
        assert await record.store_step(step) is None
        result = ChatMessage(Role.TOOL, "sunny", tool_call_id="c1")
        assert await record.store([record.row(result)]) == []
        turn.next_step()
        record.begin_step(50)
        turn.add_text("Sunny.")
        record.end_step([])
        assert await record.store_answer(ChatMessage(Role.ASSISTANT, "Sunny.")) is None
        assert record.kept == [step, result]
        # The session's usage is the turn's: there is no session to add it to.
        assert turn.usage.session == turn.usage.turn
        assert turn.usage.turn.prompt_tokens == 42 + 50
        done = await record.end.complete(None, TurnStatus.OK, "Sunny.")
        assert done.session_usage == done.turn_usage and done.assistant_message_id == ""

    asyncio.run(run())


def test_the_contexts_go_on_from_the_kept_steps() -> None:
    async def run() -> None:
        req, turn, record = ephemeral()
        contexts = StepContexts(None, 8000, req, turn, steps=record.kept)  # type: ignore[arg-type]
        first = await contexts.for_user_message("hi")
        assert [(m.role, m.content) for m in first.messages] == [
            (Role.SYSTEM, "You are terse."),
            (Role.USER, "hi"),
        ]
        record.kept += [
            ChatMessage(Role.ASSISTANT, "", (RECALL,)),
            ChatMessage(Role.TOOL, "sunny", tool_call_id="c1"),
        ]
        after = await contexts.for_continuation()
        assert [m.role for m in after.messages] == [
            Role.SYSTEM,
            Role.USER,
            Role.ASSISTANT,
            Role.TOOL,
        ]
        assert after.messages[1].content == "hi" and after.messages[3].content == "sunny"

    asyncio.run(run())


def test_a_prebuilt_observation_follows_the_question_and_the_action() -> None:
    """A prebuilt ReAct step after an observation (stored or not): the host's list, the
    question, the step's action, then the observation as the user message."""

    async def run() -> None:
        req = ChatTurnRequest(Caller("alice"), "", "hi", TOKENIZER, messages=HOST, react=True)
        turn = Turn(Session("s1", "alice"), 1, "alice", TOKENIZER, "hi")
        action = ChatMessage(Role.ASSISTANT, '<action tool="nope">x</action>')
        contexts = StepContexts(None, 8000, req, turn, steps=[action])  # type: ignore[arg-type]
        observed = await contexts.for_user_message("<observation>no such tool</observation>")
        assert [(m.role, m.content) for m in observed.messages] == [
            (Role.SYSTEM, "You are terse."),
            (Role.USER, "hi"),
            (Role.ASSISTANT, action.content),
            (Role.USER, "<observation>no such tool</observation>"),
        ]

    asyncio.run(run())

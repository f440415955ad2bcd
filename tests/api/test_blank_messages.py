"""Which messages the pipeline filters, through the gRPC API: an assistant message with
neither text nor tool calls goes, a blank user message stays (as the message pipeline's
filter keeps every message but empty answers). The Anthropic format alone cannot carry
it (the Messages API refuses a text block without text): there, in BuildMessages and in
a chat turn on the Anthropic provider, it is left out and the report says so, under
DROP_REASON_EMPTY."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc

from tests.support.chat_live import Live
from tests.support.fakes import anthropic_sse as an
from tests.support.fakes import openai_sse as oa

HISTORY = [
    pb.Message(role=pb.ROLE_USER, content="Hello"),
    pb.Message(role=pb.ROLE_ASSISTANT, content="Hi, what can I do?"),
    pb.Message(role=pb.ROLE_USER, content="   "),  # blank: kept
    pb.Message(role=pb.ROLE_ASSISTANT, content=" \n"),  # says nothing: dropped
    pb.Message(role=pb.ROLE_ASSISTANT, content="Still there?"),
]


@pytest.fixture(scope="module")
def context(address: str) -> Iterator[context_pb2_grpc.ContextServiceStub]:
    with grpc.insecure_channel(address) as channel:
        yield context_pb2_grpc.ContextServiceStub(channel)


def build(
    context: context_pb2_grpc.ContextServiceStub, output_format: int
) -> pb.BuildMessagesResponse:
    return context.BuildMessages(
        pb.BuildMessagesRequest(
            system_prompts=["Be brief."],
            history=HISTORY,
            user_message="Yes, go on.",
            token_budget=10_000,
            tokenizer="estimate",
            output_format=output_format,
        )
    )


def dropped(response: pb.BuildMessagesResponse) -> list[tuple[int, int, int]]:
    return [(d.start_index, d.count, d.reason) for d in response.report.dropped]


@pytest.mark.parametrize("output_format", [pb.OUTPUT_FORMAT_NEUTRAL, pb.OUTPUT_FORMAT_OPENAI])
def test_a_blank_user_message_is_kept_an_empty_answer_dropped(
    context: context_pb2_grpc.ContextServiceStub, output_format: int
) -> None:
    response = build(context, output_format)
    assert [(m.role, m.content) for m in response.messages] == [
        (pb.ROLE_SYSTEM, "Be brief."),
        (pb.ROLE_USER, "Hello"),
        (pb.ROLE_ASSISTANT, "Hi, what can I do?"),
        (pb.ROLE_USER, "   "),
        (pb.ROLE_ASSISTANT, "Still there?"),
        (pb.ROLE_USER, "Yes, go on."),
    ]
    assert dropped(response) == [(3, 1, pb.DROP_REASON_EMPTY)]
    assert response.report.history_kept == 4
    if output_format == pb.OUTPUT_FORMAT_OPENAI:
        sent = json.loads(response.payload_json)["messages"]
        assert {"role": "user", "content": "   "} in sent


def test_the_anthropic_format_leaves_it_out_and_says_so(
    context: context_pb2_grpc.ContextServiceStub,
) -> None:
    response = build(context, pb.OUTPUT_FORMAT_ANTHROPIC)
    assert [m.content for m in response.messages] == [
        "Be brief.",
        "Hello",
        "Hi, what can I do?",
        "Still there?",
        "Yes, go on.",
    ]
    assert dropped(response) == [(2, 2, pb.DROP_REASON_EMPTY)]
    payload = json.loads(response.payload_json)
    assert [turn["role"] for turn in payload["messages"]] == ["user", "assistant", "user"]
    assert all(turn["content"] for turn in payload["messages"])
    # The two answers either side of it are one assistant turn now.
    assert [b["text"] for b in payload["messages"][1]["content"]] == [
        "Hi, what can I do?",
        "Still there?",
    ]


async def test_a_prebuilt_chat_turn_sends_it_to_the_model(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    request = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id="blank-turns"),
        messages=[pb.Message(role=pb.ROLE_SYSTEM, content="Be brief."), *HISTORY],
        user_message="Yes, go on.",
    )
    fake.script(oa.text_reply(["Going on."]))
    events: list[Any] = [e async for e in live.chat.StreamChat(request)]
    assert events[-1].turn_completed.status == cpb.TURN_STATUS_OK
    sent = [(m["role"], m["content"]) for m in fake.bodies()[-1]["messages"]]
    assert ("user", "   ") in sent
    assert ("assistant", " \n") not in sent
    context = events[0].turn_started.context
    assert [(d.start_index, d.count, d.reason) for d in context.dropped] == [
        (3, 1, pb.DROP_REASON_EMPTY)
    ]


async def test_a_chat_turn_on_the_anthropic_provider_leaves_it_out_and_says_so(
    anthropic_live: Live,
) -> None:
    live, fake = anthropic_live, anthropic_live.fake
    fake.script(an.text_reply(["Going on."]))
    request = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id="blank-turns"),
        messages=[pb.Message(role=pb.ROLE_SYSTEM, content="Be brief."), *HISTORY],
        user_message="Yes, go on.",
    )
    events: list[Any] = [e async for e in live.chat.StreamChat(request)]
    assert events[-1].turn_completed.status == cpb.TURN_STATUS_OK
    sent = fake.bodies()[-1]["messages"]
    assert [turn["role"] for turn in sent] == ["user", "assistant", "user"]
    assert all(turn["content"] for turn in sent)
    context = events[0].turn_started.context
    assert [(d.start_index, d.count, d.reason) for d in context.dropped] == [
        (2, 2, pb.DROP_REASON_EMPTY)
    ]

"""Plain requests, through the real path: ``build_messages`` answers them by a shortcut
(no units, no repairs) exactly when the request is the plain case, and then answers
what the message pipeline answers; the servicer's response is the pipeline's, byte for
byte."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any
from unittest import mock

import pytest
from contextd.app.context import ContextApp
from contextd.app.session_build_request import BuiltContext
from contextd.core import build
from contextd.core.build import build_messages
from contextd.core.build_request import BuildRequest, BuildResult, validate_build_request
from contextd.core.content import ImageLimits
from contextd.core.errors import BudgetExceeded, FailedPrecondition, InvalidArgument, Violations
from contextd.core.formats import OutputFormat
from contextd.core.messages import ChatMessage, Role
from contextd.core.pipeline import DroppedRange, DropReason, is_blank, validate_history
from contextd.core.tokens import TokenizerRegistry
from contextd.fronts.grpc.context_servicer import (
    ContextServicer,
    build_response_to_pb,
    inline_build_from_pb,
)
from contextd.v1 import context_pb2 as pb
from hypothesis import given
from hypothesis import strategies as st

from tests.support.build_strategies import (
    BLANKS,
    NONBLANK,
    PROPERTY_SETTINGS,
    TOKENIZERS,
    budgets,
    requests,
)

ROLE_NUMBERS = {Role.SYSTEM: 1, Role.USER: 2, Role.ASSISTANT: 3, Role.TOOL: 4}


def pipeline(req: BuildRequest) -> BuildResult:
    """The general way: a trusted history is not checked, so never known to be plain."""
    return build_messages(replace(req, history_trusted=True))


def outcome(build_it: Any, req: BuildRequest) -> BuildResult | tuple[type[Exception], str]:
    try:
        result: BuildResult = build_it(req)
    except (InvalidArgument, BudgetExceeded, FailedPrecondition) as error:
        return type(error), str(error)
    return result


def is_plain_case(req: BuildRequest) -> bool:
    """The reference: a valid request of text turns with nothing to repair, a user
    message, the neutral output without layers or a summary, and room for the required
    messages."""
    v = Violations()
    validate_history(req.history, v)
    if v or is_blank(req.user_message) or req.token_budget <= 0:
        return False
    if req.output_format is not OutputFormat.NEUTRAL or req.layers or req.compression_summary:
        return False
    if any(
        m.role not in (Role.USER, Role.ASSISTANT) or is_blank(m.content) or m.tool_call_id
        for m in req.history
    ):
        return False
    result = outcome(pipeline, req)
    return isinstance(result, BuildResult) and not result.report.required_over_budget


@contextmanager
def without_the_pipeline() -> Iterator[None]:
    """The units and repairs of the general way fail when used."""
    refused = AssertionError("a plain request went through the message pipeline")
    with (
        mock.patch.object(build, "units_newest_first", side_effect=refused),
        mock.patch.object(build, "restore_tool_results", side_effect=refused),
    ):
        yield


def check_both_ways(req: BuildRequest) -> None:
    """The real path answers as the pipeline does, and a plain request without it."""
    if is_plain_case(req):
        with without_the_pipeline():
            result = build_messages(req)
        assert result == pipeline(req)
        return
    answer = outcome(build_messages, req)
    # A trusted history is not checked: only the invalid requests answer differently.
    if not (isinstance(answer, tuple) and answer[0] is InvalidArgument):
        assert answer == outcome(pipeline, req)


@st.composite
def plain_histories(draw: st.DrawFn) -> list[ChatMessage]:
    """Mostly plain turns, now and then one thing that is not (a blank text, a tool
    message, a repeated id, a tool call id), so both ways get exercised."""
    messages = []
    for i in range(draw(st.integers(0, 12))):
        role = draw(st.sampled_from([Role.USER, Role.ASSISTANT]))
        text = draw(st.one_of(NONBLANK, NONBLANK, NONBLANK, BLANKS))
        message_id = draw(st.sampled_from(["", f"m{i}", f"m{i}", "m0"]))
        messages.append(ChatMessage(role, text, id=message_id))
    if messages and draw(st.integers(0, 5)) == 0:
        at = draw(st.integers(0, len(messages) - 1))
        odd = draw(
            st.sampled_from(
                [
                    ChatMessage(Role.TOOL, "result", tool_call_id="call_1"),
                    ChatMessage(Role.USER, "hi", tool_call_id="call_1"),
                    ChatMessage(Role.SYSTEM, "system in history"),
                ]
            )
        )
        messages[at] = odd
    return messages


@st.composite
def plain_requests(draw: st.DrawFn) -> BuildRequest:
    req = BuildRequest(
        user_message=draw(st.one_of(NONBLANK, NONBLANK, BLANKS)),
        token_budget=0,
        tokenizer=TOKENIZERS[draw(st.sampled_from(sorted(TOKENIZERS)))],
        system_prompts=draw(st.lists(st.one_of(NONBLANK, BLANKS), max_size=2)),
        history=draw(plain_histories()),
    )
    return replace(req, token_budget=draw(budgets(req)))


@PROPERTY_SETTINGS
@given(plain_requests())
def test_plain_requests_answer_as_the_pipeline(req: BuildRequest) -> None:
    check_both_ways(req)


@PROPERTY_SETTINGS
@given(requests())
def test_other_requests_go_the_general_way(req: BuildRequest) -> None:
    check_both_ways(req)


def test_plain_request_keeps_the_newest_that_fit() -> None:
    history = [
        ChatMessage(Role.USER, "first question", id="a"),
        ChatMessage(Role.ASSISTANT, "first answer", id="b"),
        ChatMessage(Role.USER, "second question"),
        ChatMessage(Role.ASSISTANT, "second answer"),
    ]
    tok = TOKENIZERS["cl100k_base"]
    req = BuildRequest("third question", 22, tok, system_prompts=["Be brief."], history=history)
    with without_the_pipeline():
        result = build_messages(req)
    # Each message costs 3 + 2 tokens; two fit beside the rest.
    assert result.messages == [
        ChatMessage(Role.SYSTEM, "Be brief."),
        *history[2:],
        ChatMessage(Role.USER, "third question"),
    ]
    assert result.sources == [None, 2, 3, None]
    assert result.report.dropped == [DroppedRange(0, 2, DropReason.BUDGET)]
    assert result == pipeline(req)


PIPELINE = (AssertionError, "message pipeline")


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"user_message": "  "}, (InvalidArgument, "user_message")),
        ({"token_budget": 0}, (InvalidArgument, "token_budget")),
        ({"token_budget": 5}, PIPELINE),  # the system prompt and user message alone are over
        (
            {"history": [ChatMessage(Role.USER, "a", id="x"), ChatMessage(Role.USER, "b", id="x")]},
            (InvalidArgument, r"history\[1\]\.id"),
        ),
        ({"history": [ChatMessage(Role.ASSISTANT, "")]}, PIPELINE),
        ({"output_format": OutputFormat.OPENAI}, PIPELINE),
    ],
)
def test_anything_else_goes_the_general_way(
    change: dict[str, object], refusal: tuple[type[Exception], str]
) -> None:
    """Checked in full (every bad field named), then built by the pipeline."""
    req = BuildRequest("question", 100, TOKENIZERS["cl100k_base"], system_prompts=["Be brief."])
    changed = replace(req, **change)  # type: ignore[arg-type]
    assert not is_plain_case(changed)
    error, match = refusal
    with pytest.raises(error, match=match), without_the_pipeline():
        build_messages(changed)


# --- through the servicer: the response is the pipeline's, byte for byte ---


def _pb_request(req: BuildRequest) -> pb.BuildMessagesRequest:
    return pb.BuildMessagesRequest(
        system_prompts=req.system_prompts,
        history=[
            pb.Message(
                id=m.id, role=ROLE_NUMBERS[m.role], content=m.content, tool_call_id=m.tool_call_id
            )
            for m in req.history
        ],
        user_message=req.user_message,
        token_budget=req.token_budget,
        tokenizer=req.tokenizer.name,
    )


REGISTRY = TokenizerRegistry()
SERVICER = ContextServicer(ContextApp(REGISTRY, 1000, None), None, None)  # type: ignore[arg-type]


def _answer(build_response: Any) -> bytes | type[BaseException]:
    try:
        response = build_response()
    except (InvalidArgument, BudgetExceeded, FailedPrecondition) as error:
        return type(error)
    return bytes(response.SerializeToString(deterministic=True))


@PROPERTY_SETTINGS
@given(plain_requests())
def test_servicer_answers_as_the_pipeline(req: BuildRequest) -> None:
    request = _pb_request(req)
    history_pb = request.history[:]

    def by_the_pipeline() -> pb.BuildMessagesResponse:
        command = inline_build_from_pb(request, history_pb, REGISTRY, ImageLimits())
        validate_build_request(command)  # what the pipeline then trusts
        return build_response_to_pb(BuiltContext(pipeline(command), []), history_pb)

    def by_the_servicer() -> pb.BuildMessagesResponse:
        response: pb.BuildMessagesResponse = asyncio.run(SERVICER.BuildMessages(request, None))
        return response

    assert _answer(by_the_servicer) == _answer(by_the_pipeline)


def test_unknown_role_number_is_named() -> None:
    request = pb.BuildMessagesRequest(
        history=[pb.Message(role=9, content="text")], user_message="q", token_budget=100
    )
    with pytest.raises(InvalidArgument) as raised:
        asyncio.run(SERVICER.BuildMessages(request, None))
    assert [v.field for v in raised.value.violations] == ["history[0].role"]

"""core.plain_build against core.build_messages: the shortcut answers exactly when the
request is the plain case, and then answers what the general way answers."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any

import pytest
from contextd.core.build import BuildRequest, BuildResult, build_messages
from contextd.core.errors import BudgetExceeded, FailedPrecondition, InvalidArgument, Violations
from contextd.core.formats import OutputFormat
from contextd.core.inline_request import InlineRequest
from contextd.core.messages import ChatMessage, Role
from contextd.core.pipeline import is_blank, validate_history
from contextd.core.plain_build import PlainResult, build_plain
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

# Role numbers as the API sends them (contextd.v1.Role); 9 is one it does not define.
ROLE_NUMBERS = {Role.SYSTEM: 1, Role.USER: 2, Role.ASSISTANT: 3, Role.TOOL: 4}
ROLES = {number: role for role, number in ROLE_NUMBERS.items()}


@dataclass(frozen=True)
class ApiRow:
    """An API message: what the gRPC message offers, the role as a number."""

    id: str
    role: int
    content: str
    tool_calls: tuple[object, ...]
    tool_call_id: str
    parts: tuple[object, ...] = ()


def rows_of(history: list[ChatMessage] | tuple[ChatMessage, ...]) -> list[ApiRow]:
    return [
        ApiRow(m.id, ROLE_NUMBERS[m.role], m.content, m.tool_calls, m.tool_call_id) for m in history
    ]


def plain_request(req: BuildRequest) -> InlineRequest:
    return InlineRequest(
        rows_of(list(req.history)),
        ROLES,
        req.system_prompts,
        req.user_message,
        req.token_budget,
        req.tokenizer.name,
    )


def general(req: BuildRequest) -> BuildResult | None:
    try:
        return build_messages(req)
    except (InvalidArgument, BudgetExceeded, FailedPrecondition):
        return None


def is_plain_case(req: BuildRequest, result: BuildResult | None) -> bool:
    """The reference: a valid request whose history has nothing to repair, with a user
    message, and room for it."""
    return (
        result is not None
        and validate_history(req.history, Violations())
        and not is_blank(req.user_message)
        and not result.report.required_over_budget
    )


def assert_same(req: BuildRequest, plain: PlainResult, result: BuildResult) -> None:
    system = [ChatMessage(Role.SYSTEM, plain.system_prompt)] if plain.system_prompt else []
    kept = list(req.history[plain.kept_from :])
    assert result.messages == [*system, *kept, ChatMessage(Role.USER, req.user_message)]
    head = [plain.report.system_tokens] if system else []
    tail = [plain.report.user_message_tokens]
    assert result.message_tokens == head + plain.kept_tokens + tail
    assert plain.report == result.report


@st.composite
def plain_histories(draw: st.DrawFn) -> list[ChatMessage]:
    """Mostly plain turns, now and then one thing that is not (a blank text, a tool
    message, a repeated id, a tool call id), so both answers get exercised."""
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


def check_both_ways(req: BuildRequest) -> None:
    """The shortcut answers exactly the plain case, and then as the general way does."""
    result = general(req)
    plain = build_plain(plain_request(req), req.tokenizer)
    assert (plain is not None) == is_plain_case(req, result)
    if plain is not None:
        assert result is not None
        assert_same(req, plain, result)


@PROPERTY_SETTINGS
@given(plain_requests())
def test_plain_shortcut_matches_the_general_way(req: BuildRequest) -> None:
    check_both_ways(req)


@PROPERTY_SETTINGS
@given(requests())
def test_plain_shortcut_declines_what_it_cannot_answer(req: BuildRequest) -> None:
    # The servicer only asks for neutral requests without layers or a summary.
    neutral = OutputFormat.NEUTRAL
    check_both_ways(replace(req, layers=None, compression_summary=None, output_format=neutral))


def test_plain_request_is_answered_by_the_shortcut() -> None:
    history = [
        ChatMessage(Role.USER, "first question", id="a"),
        ChatMessage(Role.ASSISTANT, "first answer", id="b"),
        ChatMessage(Role.USER, "second question"),
        ChatMessage(Role.ASSISTANT, "second answer"),
    ]
    tok = TOKENIZERS["cl100k_base"]
    req = BuildRequest("third question", 22, tok, system_prompts=["Be brief."], history=history)
    plain = build_plain(plain_request(req), req.tokenizer)
    assert plain is not None
    assert plain.kept_from == 2  # each message costs 3 + 2 tokens; two fit beside the rest
    assert_same(req, plain, build_messages(req))


@pytest.mark.parametrize(
    "change",
    [
        {"user_message": "  "},
        {"token_budget": 0},
        {"token_budget": 5},  # the system prompt and user message alone are over
        {"history": [ChatMessage(Role.USER, "a", id="x"), ChatMessage(Role.USER, "b", id="x")]},
        {"history": [ChatMessage(Role.ASSISTANT, "")]},
    ],
)
def test_anything_else_goes_the_general_way(change: dict[str, object]) -> None:
    req = BuildRequest("question", 100, TOKENIZERS["cl100k_base"], system_prompts=["Be brief."])
    changed = replace(req, **change)  # type: ignore[arg-type]
    assert build_plain(plain_request(changed), req.tokenizer) is None


def test_unknown_role_number_goes_the_general_way() -> None:
    req = BuildRequest("question", 100, TOKENIZERS["cl100k_base"])
    rows = [ApiRow("", 9, "text", (), "")]
    assert build_plain(replace(plain_request(req), history=rows), req.tokenizer) is None


# --- through the servicer: the shortcut's response is the general way's, byte for byte ---


def _pb_request(req: BuildRequest) -> Any:
    from contextd.v1 import context_pb2 as pb

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


def _servicer(shortcut: bool) -> Any:
    from contextd.api.context_servicer import ContextServicer
    from contextd.app.context import ContextApp
    from contextd.core.tokens import TokenizerRegistry

    app = ContextApp(TokenizerRegistry(), 1000, None)  # type: ignore[arg-type]
    if not shortcut:
        app.build_plain = lambda request: None  # type: ignore[method-assign]
    return ContextServicer(app, None)  # type: ignore[arg-type]


SHORTCUT, GENERAL = _servicer(True), _servicer(False)


@PROPERTY_SETTINGS
@given(plain_requests())
def test_servicer_answers_the_same_either_way(req: BuildRequest) -> None:
    request = _pb_request(req)

    def answer(servicer: Any) -> bytes | type[BaseException]:
        try:
            response = asyncio.run(servicer.BuildMessages(request, None))
        except (InvalidArgument, BudgetExceeded, FailedPrecondition) as error:
            return type(error)
        return bytes(response.SerializeToString(deterministic=True))

    assert answer(SHORTCUT) == answer(GENERAL)
